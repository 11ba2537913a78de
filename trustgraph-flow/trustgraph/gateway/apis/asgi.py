"""One aiohttp request served by an ASGI application: the seam between the gateway
(aiohttp) and a library whose server side is ASGI (the ``mcp`` SDK's streamable HTTP
transport, built on Starlette).

ASGI is three callables, so the bridge is small: the request becomes the ``http``
scope (with ``extra`` keys the application reads, such as who is asking), its body
the one ``http.request`` message, and the application's ``http.response.start`` and
``http.response.body`` messages become a streamed aiohttp response, written as
they come (an SSE answer reaches the client event by event). The body is read
first, within the gateway's limit (``TG_GATEWAY_MAX_FRAME``).

A client that goes away is told to the application as ASGI says, by
``http.disconnect`` from ``receive``, not by cancelling it: the gateway cancels
the handler of a dropped connection, so the application runs in a task of its own
and is given ``DISCONNECT_GRACE`` seconds to wind down (an SSE response stops, the
work behind it is cancelled) before it is cancelled too. Cancelling it outright
would cut short what it does after a client has its answer (the ``mcp`` SDK keeps
a session only once the request that opened it has ended well).
"""
import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

DISCONNECT_GRACE = 5.0

log = logging.getLogger(__name__)


async def served(request: web.Request, app: ASGIApp,
                 extra: dict[str, Any] | None = None) -> web.StreamResponse:
    body = await request.read()
    exchange = _Exchange(request, body)
    running = asyncio.ensure_future(app(scope_of(request, extra or {}), exchange.receive,
                                        exchange.send))
    try:
        await asyncio.shield(running)
    except asyncio.CancelledError:
        exchange.gone.set()  # the client left, or the gateway is stopping
        with contextlib.suppress(Exception, asyncio.CancelledError):
            async with asyncio.timeout(DISCONNECT_GRACE):
                await asyncio.shield(running)
        running.cancel()
        raise
    except Exception:
        if exchange.response is None:
            raise  # nothing sent yet: the route's error answer
        log.exception("the ASGI application failed after its answer began")
        return exchange.response  # the client sees the answer cut short
    if exchange.response is None:  # the application answered nothing: its failure
        raise RuntimeError("the ASGI application sent no response")
    return exchange.response


class _Exchange:
    """The ASGI ``receive`` and ``send`` of one request."""

    def __init__(self, request: web.Request, body: bytes) -> None:
        self.request = request
        self.body: bytes | None = body
        self.response: web.StreamResponse | None = None
        self.gone = asyncio.Event()

    async def receive(self) -> Message:
        if self.body is not None:
            body, self.body = self.body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if self.gone.is_set():
            return  # nobody to write to
        try:
            await self._write(message)
        except ConnectionError:
            self.gone.set()

    async def _write(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.response = web.StreamResponse(status=message["status"], headers=CIMultiDict(
                (name.decode("latin-1"), value.decode("latin-1"))
                for name, value in message.get("headers", ())))
            await self.response.prepare(self.request)
        elif message["type"] == "http.response.body" and self.response is not None:
            if message.get("body"):
                await self.response.write(message["body"])
            if not message.get("more_body", False):
                await self.response.write_eof()


def scope_of(request: web.Request, extra: dict[str, Any]) -> dict[str, Any]:
    peer = request.transport.get_extra_info("peername") if request.transport else None
    host = request.host.rsplit(":", 1)
    return {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": f"{request.version.major}.{request.version.minor}",
        "method": request.method, "scheme": request.scheme, "path": request.path,
        "raw_path": request.raw_path.split("?", 1)[0].encode(),
        "query_string": request.query_string.encode(), "root_path": "",
        "headers": [(name.lower(), value) for name, value in request.raw_headers],
        "client": tuple(peer[:2]) if isinstance(peer, tuple) else None,
        "server": (host[0], int(host[1])) if len(host) == 2 and host[1].isdigit() else None,
        "state": {}, **extra}
