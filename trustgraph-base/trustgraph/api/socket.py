"""The client's transport: one websocket to the gateway carrying many requests.

A ``Connection`` is one open socket: a single reader task receives every frame and
routes it by ``id`` to that request's bounded ``Inbox``; requests only send. The
``GatewaySocket`` owns the current connection, opens it on first use and opens a new
one when the last has dropped. ``request`` is the whole request/response contract of
the gateway's websocket protocol (PROTOCOL §1): send, read until ``complete``, raise
errors, and send a cancel when the caller stops listening early.
"""
import asyncio
import itertools
import json
import logging
from collections import deque
from collections.abc import AsyncGenerator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from .errors import TrustGraphError, error_from
from .wire import traceparent

log = logging.getLogger(__name__)

SOCKET_PATH = "/api/v1/socket"
CONNECT_TIMEOUT = 10.0   # seconds to open the socket and, with a token, be authenticated
HEARTBEAT = 20.0         # ping interval; a peer that stops answering closes the socket
MAX_FRAME = 64 * 2**20   # largest frame accepted from the gateway
MAX_WAITING_FRAMES = 10_000  # frames held for one request whose caller is not reading
MAX_INFLIGHT = 256       # requests at once on one socket (the gateway's default limit);
                         # more wait for a slot rather than being refused


def socket_url(url: str) -> str:
    """The websocket address for a gateway URL: ``http://h:p/`` → ``ws://h:p/api/v1/socket``
    (``https`` → ``wss``; a path prefix is kept; a full ``ws(s)://`` socket URL is used as is)."""
    parts = urlsplit(url)
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme)
    if scheme is None or not parts.netloc:
        raise TrustGraphError("connection", f"not a gateway URL: {url!r} "
                                            "(expected e.g. http://localhost:8888/)")
    path = parts.path.rstrip("/")
    if not path.endswith(SOCKET_PATH):
        path += SOCKET_PATH
    return urlunsplit((scheme, parts.netloc, path, parts.query, ""))


class Inbox:
    """Frames for one request, in order, then at most one failure. Bounded: ``put``
    refuses a frame past ``limit`` rather than letting a caller that stopped reading
    hold the gateway's output in memory."""

    def __init__(self, limit: int) -> None:
        self._frames: deque[dict] = deque()
        self._limit = limit
        self._failure: TrustGraphError | None = None
        self._ready = asyncio.Event()

    def put(self, frame: dict) -> bool:
        if len(self._frames) >= self._limit:
            return False
        self._frames.append(frame)
        self._ready.set()
        return True

    def fail(self, error: TrustGraphError) -> None:
        self._failure = self._failure or error
        self._ready.set()

    async def get(self) -> dict:
        while not self._frames:
            if self._failure is not None:
                raise self._failure
            self._ready.clear()
            await self._ready.wait()
        return self._frames.popleft()


class Connection:
    """One open websocket and the requests travelling on it."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, url: str, max_waiting: int) -> None:
        self.ws = ws
        self._url = url
        self._max_waiting = max_waiting
        self._inboxes: dict[str, Inbox] = {}
        self._reader = asyncio.create_task(self._read(), name="trustgraph-api reader")

    @property
    def alive(self) -> bool:
        return not self.ws.closed and not self._reader.done()

    def open_inbox(self, request_id: str) -> Inbox:
        inbox = self._inboxes[request_id] = Inbox(self._max_waiting)
        return inbox

    def close_inbox(self, request_id: str) -> None:
        self._inboxes.pop(request_id, None)

    async def send(self, frame: dict) -> None:
        try:
            await self.ws.send_str(json.dumps(frame))
        except (aiohttp.ClientError, ConnectionError, RuntimeError) as error:
            raise TrustGraphError("connection", f"the connection to the gateway at "
                                                f"{self._url} was lost: {error}") from None

    async def close(self) -> None:
        await self.ws.close()
        await asyncio.gather(self._reader, return_exceptions=True)

    async def _read(self) -> None:
        try:
            async for message in self.ws:
                if message.type == aiohttp.WSMsgType.TEXT:
                    self._route(message.data)
        except Exception as error:  # the socket broke; every waiting request is told below
            log.debug("gateway socket reader stopped: %s", error)
        finally:
            lost = TrustGraphError("connection",
                                   f"the connection to the gateway at {self._url} was lost")
            for inbox in self._inboxes.values():
                inbox.fail(lost)
            self._inboxes.clear()

    def _route(self, data: str) -> None:
        try:
            frame = json.loads(data)
        except ValueError:
            log.warning("gateway sent a frame that is not JSON; ignored")
            return
        request_id = frame.get("id") if isinstance(frame, dict) else None
        if not isinstance(request_id, str):
            return  # a frame with no request
        inbox = self._inboxes.get(request_id)
        if inbox is None:
            return  # a late frame for a request that ended
        if not inbox.put(frame):
            del self._inboxes[request_id]
            inbox.fail(TrustGraphError("overflow", f"more than {self._max_waiting} "
                                                   "responses waiting: the caller is not reading"))


class GatewaySocket:
    """The gateway's websocket, opened on first use and reopened after it drops."""

    def __init__(self, url: str, token: str | None = None, *,
                 connect_timeout: float = CONNECT_TIMEOUT,
                 max_waiting: int = MAX_WAITING_FRAMES,
                 max_inflight: int = MAX_INFLIGHT, traced: bool = False) -> None:
        self.url = url
        self._traced = traced
        self._ws_url = socket_url(url)
        self._token = token or None
        self._connect_timeout = connect_timeout
        self._max_waiting = max_waiting
        self._slots = asyncio.Semaphore(max_inflight)
        self._ids = itertools.count(1)
        self._session: aiohttp.ClientSession | None = None
        self._connection: Connection | None = None
        self._opening: asyncio.Lock | None = None

    async def request(self, service: str, request: dict, flow: str | None = "default"
                      ) -> AsyncGenerator[dict, None]:
        """Send one request; yield each ``response`` object until the complete one.

        A top-level ``error`` or a ``response.error`` raises ``TrustGraphError``.
        Leaving the loop early (break, exception, cancelled task) sends a cancel, so
        the gateway stops the work (and its LLM stream) at once.
        """
        envelope: dict[str, Any] = {"id": str(next(self._ids)), "service": service,
                                    "request": request}
        if flow is not None:
            envelope["flow"] = flow
        if self._traced:
            envelope["traceparent"] = traceparent()
        async with self._slots:
            connection = await self.connection()
            inbox = connection.open_inbox(envelope["id"])
            complete = False
            try:
                await connection.send(envelope)
                while not complete:
                    frame = await inbox.get()
                    response = frame.get("response")
                    error = frame.get("error") or (
                        response.get("error") if isinstance(response, dict) else None)
                    complete = bool(frame.get("complete")) or bool(error)
                    if error:
                        raise error_from(error)
                    yield response or {}
            finally:
                connection.close_inbox(envelope["id"])
                if not complete and connection.alive:
                    await _cancel(connection, envelope["id"])

    async def connection(self) -> Connection:
        """The live connection, opening one if there is none."""
        if self._connection is not None and self._connection.alive:
            return self._connection
        self._opening = self._opening or asyncio.Lock()
        async with self._opening:
            if self._connection is None or not self._connection.alive:
                self._connection = Connection(await self._open(), self.url, self._max_waiting)
            return self._connection

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _open(self) -> aiohttp.ClientWebSocketResponse:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        try:
            async with asyncio.timeout(self._connect_timeout):
                ws = await self._session.ws_connect(self._ws_url, heartbeat=HEARTBEAT,
                                                    max_msg_size=MAX_FRAME)
                try:
                    if self._token is not None:
                        await self._authenticate(ws)
                except BaseException:
                    await ws.close()
                    raise
                return ws
        except aiohttp.WSServerHandshakeError as error:
            if error.status in (401, 403):
                raise TrustGraphError("auth", f"the gateway at {self.url} refused the "
                                              f"token (HTTP {error.status})") from None
            raise self._unreachable(f"{self._ws_url} answered HTTP {error.status} instead "
                                    "of opening a websocket (is this a TrustGraph "
                                    "gateway?)") from None
        except TimeoutError:
            raise self._unreachable(f"no answer within {self._connect_timeout:g} s") from None
        except aiohttp.ClientConnectorError as error:
            raise self._unreachable(connect_failure(error.os_error)) from None
        except (aiohttp.ClientError, OSError) as error:
            raise self._unreachable(str(error) or type(error).__name__) from None

    async def _authenticate(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        """Send the auth frame; its answer comes before any request can be sent."""
        await ws.send_str(json.dumps({"type": "auth", "token": self._token}))
        message = await ws.receive()
        try:
            reply = json.loads(message.data) if message.type == aiohttp.WSMsgType.TEXT else {}
        except ValueError:
            reply = {}
        if isinstance(reply, dict) and reply.get("type") == "auth-ok":
            return
        detail = reply.get("error") if isinstance(reply, dict) else None
        raise TrustGraphError("auth", f"the gateway at {self.url} refused the token"
                                      + (f" ({_text_of(detail)})" if detail else ""))

    def _unreachable(self, reason: str) -> TrustGraphError:
        return TrustGraphError("connection",
                               f"cannot connect to the gateway at {self.url}: {reason}")


async def _cancel(connection: Connection, request_id: str) -> None:
    try:
        await asyncio.shield(connection.send({"type": "cancel", "id": request_id}))
    except TrustGraphError as error:
        log.debug("cancel for request %s not sent: %s", request_id, error)


def connect_failure(error: OSError) -> str:
    if isinstance(error, ConnectionRefusedError):
        return "connection refused (is the gateway running, on this host and port?)"
    return error.strerror or str(error) or type(error).__name__


def _text_of(detail: Any) -> str:
    return detail.get("message", str(detail)) if isinstance(detail, dict) else str(detail)
