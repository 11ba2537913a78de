"""``AsyncTrustGraph``: the client library, async-first.

The transport (``GatewaySocket``) does requests in general; each service below is a
few lines saying what its request holds and where its answer's text is.
"""
from collections.abc import AsyncIterator, Coroutine
from typing import Any, Literal, overload

from .socket import CONNECT_TIMEOUT, MAX_INFLIGHT, GatewaySocket
from .streams import Completion, TextStream

DEFAULT_URL = "http://localhost:8888/"


class AsyncTrustGraph:
    """A connection to a TrustGraph gateway: one websocket for any number of
    concurrent requests, opened on first use and reopened if it drops.

    ``async with AsyncTrustGraph(url, token) as tg: print(await tg.text_completion(s, p))``
    """

    def __init__(self, url: str = DEFAULT_URL, token: str | None = None, *,
                 connect_timeout: float = CONNECT_TIMEOUT,
                 max_inflight: int = MAX_INFLIGHT) -> None:
        self.url = url
        self._socket = GatewaySocket(url, token, connect_timeout=connect_timeout,
                                     max_inflight=max_inflight)

    async def __aenter__(self) -> "AsyncTrustGraph":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def connect(self) -> None:
        """Open the socket now (it otherwise opens on the first request), so that an
        unreachable gateway or a refused token is reported here."""
        await self._socket.connection()

    async def close(self) -> None:
        await self._socket.close()

    def request(self, service: str, request: dict[str, Any], flow: str | None = "default"
                ) -> AsyncIterator[dict[str, Any]]:
        """Any service: yields its response objects, ending after the complete one.
        ``flow=None`` for services outside flows (librarian, config). Iterate it in
        ``async for``; a caller that keeps the iterator and stops early should
        ``aclose()`` it, which cancels the request."""
        return self._socket.request(service, request, flow)

    # text-completion

    @overload
    def text_completion(self, system: str, prompt: str, streaming: Literal[False] = False,
                        flow: str = "default") -> Coroutine[Any, Any, Completion]: ...

    @overload
    def text_completion(self, system: str, prompt: str, streaming: Literal[True],
                        flow: str = "default") -> TextStream: ...

    def text_completion(self, system: str, prompt: str, streaming: bool = False,
                        flow: str = "default") -> Coroutine[Any, Any, Completion] | TextStream:
        """The LLM's answer. ``await`` it for the text (a ``str`` with ``.usage``); with
        ``streaming=True`` iterate it for text deltas as they arrive, then read
        ``.usage``."""
        stream = TextStream(lambda: self.request("text-completion", {
            "system": system, "prompt": prompt, "streaming": streaming}, flow), _response_text)
        return stream if streaming else stream.collect()


def _response_text(response: dict[str, Any]) -> str:
    return response.get("response") or ""
