"""``AsyncTrustGraph``: the client library, async-first.

The transport (``GatewaySocket``) does requests in general; each service below is a
few lines saying what its request holds and where its answer's text is.
"""
import json
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from contextlib import aclosing
from typing import Any, Literal, overload

from .socket import CONNECT_TIMEOUT, MAX_INFLIGHT, GatewaySocket
from .streams import Completion, TextStream

DEFAULT_URL = "http://localhost:8888/"


class PromptStream(TextStream):
    """A prompt's answer as text deltas (iterate it once). A JSON template's answer is
    no text but one parsed value: ``object``, set (and ``is_object`` true) once the
    stream has ended."""

    def __init__(self, responses: Callable[[], AsyncIterator[dict]]) -> None:
        super().__init__(responses, self._text)
        self.object: Any = None
        self.is_object = False

    def _text(self, response: dict[str, Any]) -> str:
        if response.get("object") is not None:
            self.object = json.loads(response["object"])
            self.is_object = True
        return response.get("text") or ""

    async def answer(self) -> Any:
        """The whole answer: the text (a ``Completion``) or the parsed value."""
        text = await self.collect()
        return self.object if self.is_object else text


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

    # prompt

    @overload
    def prompt(self, id: str, variables: dict[str, Any], streaming: Literal[False] = False,
               flow: str = "default") -> Coroutine[Any, Any, Any]: ...

    @overload
    def prompt(self, id: str, variables: dict[str, Any], streaming: Literal[True],
               flow: str = "default") -> PromptStream: ...

    def prompt(self, id: str, variables: dict[str, Any], streaming: bool = False,
               flow: str = "default") -> Coroutine[Any, Any, Any] | PromptStream:
        """Template ``id`` rendered with ``variables`` and answered by the LLM.
        ``await`` it for the answer: a text template's text (a ``str`` with
        ``.usage``), or a JSON template's parsed value. With ``streaming=True`` iterate
        it for text deltas, then read ``.usage`` (and ``.object`` for a JSON template,
        which sends no text)."""
        stream = self.prompt_stream(id, variables, streaming, flow)
        return stream if streaming else stream.answer()

    def prompt_stream(self, id: str, variables: dict[str, Any], streaming: bool = True,
                      flow: str = "default") -> PromptStream:
        """``prompt`` as a ``PromptStream`` whether or not the service streams
        (without streaming, a text template's answer is one delta), for callers that
        want ``.usage`` of a JSON template's answer too."""
        return PromptStream(lambda: self.request("prompt", {
            "id": id, "variables": variables, "streaming": streaming}, flow))

    # config (global: not part of any flow)

    async def get_config(self) -> tuple[dict[str, dict[str, Any]], int]:
        """Everything: ``({type: {key: value}}, version)``."""
        response = await self._config({"operation": "config"})
        return response.get("config") or {}, response["version"]

    async def config_values(self, type: str) -> dict[str, Any]:
        """Every item of one type: ``{key: value}``."""
        response = await self._config({"operation": "getvalues", "type": type})
        return {item["key"]: item.get("value") for item in response.get("values") or []}

    async def put_config(self, values: dict[str, dict[str, Any]]) -> int:
        """Store ``{type: {key: value}}`` in one change; returns the new version."""
        items = [{"type": type, "key": key, "value": value}
                 for type, entries in values.items() for key, value in entries.items()]
        return (await self._config({"operation": "put", "values": items}))["version"]

    async def delete_config(self, keys: Iterable[tuple[str, str]]) -> int:
        """Delete ``(type, key)`` items in one change (all or, if one is missing,
        none: ``not-found``); returns the new version."""
        items = [{"type": type, "key": key} for type, key in keys]
        return (await self._config({"operation": "delete", "keys": items}))["version"]

    async def _config(self, request: dict[str, Any]) -> dict[str, Any]:
        return await _final(self.request("config", request, flow=None))


async def _final(responses: AsyncIterator[dict[str, Any]]) -> dict[str, Any]:
    """The last (complete) response of a service that answers once."""
    last: dict[str, Any] = {}
    async with aclosing(responses):
        async for last in responses:
            pass
    return last


def _response_text(response: dict[str, Any]) -> str:
    return response.get("response") or ""
