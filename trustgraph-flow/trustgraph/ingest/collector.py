"""Texts from many concurrent stage handlers, sent to the embeddings service together.

The chunk embedding stage handles each chunk as its own record, many at once. One
request per chunk costs a bus round trip and a decode and encode at both ends for
every chunk; sending the chunks that are waiting as one request costs that once.
A request never waits for more texts: texts gather only while ``in_flight`` requests
are already out, i.e. while the model has work queued anyway, so batching adds no
latency and the model never idles for it.
"""
import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from trustgraph.base import Rejected

# One result per text, in order: its vector (or whatever the sender pairs it with).
Send = Callable[[list[str]], Awaitable[list[Any]]]


class Collector:
    def __init__(self, send: Send, max_texts: int, in_flight: int = 2) -> None:
        """``send`` embeds a list of texts (one result each, in order)."""
        self._send = send
        self._max_texts = max(1, max_texts)
        self._in_flight = max(1, in_flight)
        self._waiting: list[tuple[str, asyncio.Future]] = []
        self._senders: set[asyncio.Task] = set()

    async def vector(self, text: str) -> Any:
        return (await self.vectors([text]))[0]

    async def vectors(self, texts: list[str]) -> list[Any]:
        """One result per text, in order; the first error of any of them is raised."""
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in texts]
        self._waiting += zip(texts, futures, strict=True)
        batches = -(-len(self._waiting) // self._max_texts)
        while len(self._senders) < min(self._in_flight, batches):
            sender = asyncio.create_task(self._sending())
            self._senders.add(sender)
            sender.add_done_callback(self._senders.discard)
        results = await asyncio.gather(*futures, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return results

    async def _sending(self) -> None:
        while self._waiting:
            batch = self._waiting[:self._max_texts]
            del self._waiting[:self._max_texts]
            await self._deliver(batch)

    async def _deliver(self, batch: list[tuple[str, asyncio.Future]]) -> None:
        """Every future of ``batch`` gets its vector or the error; a text refused for
        good (``Rejected``) is tried alone, so that it fails only its own record."""
        live = [(text, future) for text, future in batch if not future.done()]
        if not live:
            return
        try:
            vectors = await self._send([text for text, _ in live])
        except Rejected as error:
            if len(live) == 1:
                _settle(live[0][1], error=error)
                return
            for one in live:
                await self._deliver([one])
            return
        except Exception as error:  # passing trouble: every record is redelivered
            for _, future in live:
                _settle(future, error=error)
            return
        for (_, future), vector in zip(live, vectors, strict=False):
            _settle(future, vector)


def _settle(future: asyncio.Future, value: object = None,
            error: BaseException | None = None) -> None:
    if future.done():  # its handler was cancelled meanwhile
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
