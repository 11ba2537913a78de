"""``TrustGraph``: the blocking client, a thin bridge over ``AsyncTrustGraph``.

An event loop runs in a background thread and owns the async client. Every public
method of ``AsyncTrustGraph`` is available here with the same arguments: what it
returns is translated, never reimplemented: a coroutine becomes its result, an async
iterable becomes an iterator (whose attributes, such as ``usage``, stay readable).
"""
import asyncio
import inspect
import threading
from collections.abc import AsyncIterable, Callable, Coroutine, Iterator
from typing import Any

from .async_client import DEFAULT_URL, AsyncTrustGraph

CLOSE_TIMEOUT = 10.0  # seconds to wait for an abandoned stream to cancel its request
_END = object()


class TrustGraph:
    """``with TrustGraph(url, token) as tg: print(tg.text_completion(system, prompt))``"""

    def __init__(self, url: str = DEFAULT_URL, token: str | None = None, **options: Any) -> None:
        self._client = AsyncTrustGraph(url, token, **options)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever,
                                        name="trustgraph-api", daemon=True)
        self._thread.start()

    def __enter__(self) -> "TrustGraph":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        method = getattr(self._client, name)
        if not callable(method):
            return method

        def bridged(*args: Any, **kwargs: Any) -> Any:
            return self._bridge(method(*args, **kwargs))

        bridged.__doc__, bridged.__name__ = method.__doc__, name
        return bridged

    def __dir__(self) -> list[str]:
        public = [name for name in dir(AsyncTrustGraph) if not name.startswith("_")]
        return sorted(set(super().__dir__()) | set(public))

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._call(self._client.close(), CLOSE_TIMEOUT)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def _bridge(self, result: Any) -> Any:
        if inspect.iscoroutine(result):  # the client's methods are coroutines
            return self._call(result)
        if isinstance(result, AsyncIterable):
            return SyncStream(result, self._call)
        return result

    def _call(self, coroutine: Coroutine, timeout: float | None = None) -> Any:
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()  # e.g. Ctrl-C while waiting: the request is cancelled too
            raise


class SyncStream:
    """An async iterable living on the client's loop, iterated from another thread.
    Leaving the loop early (break, exception, Ctrl-C) closes it on the loop, which
    cancels its request."""

    def __init__(self, source: AsyncIterable, call: Callable[..., Any]) -> None:
        self._source = source
        self._call = call

    def __iter__(self) -> Iterator:
        puller = _Puller(self._source)
        try:
            while (item := self._call(puller.next())) is not _END:
                yield item
        finally:
            self._call(puller.close(), CLOSE_TIMEOUT)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._source, name)


class _Puller:
    """Runs on the loop: takes one item at a time, and on ``close`` stops a pull that
    the other thread gave up waiting for before closing the iterator."""

    def __init__(self, source: AsyncIterable) -> None:
        self._source = source
        self._iterator: Any = None
        self._pulling: asyncio.Task | None = None

    async def next(self) -> Any:
        self._pulling = asyncio.current_task()
        if self._iterator is None:
            self._iterator = aiter(self._source)
        try:
            return await anext(self._iterator)
        except StopAsyncIteration:
            return _END

    async def close(self) -> None:
        if self._pulling not in (None, asyncio.current_task()) and not self._pulling.done():
            self._pulling.cancel()
            await asyncio.wait([self._pulling])
        if hasattr(self._iterator, "aclose"):
            await self._iterator.aclose()

