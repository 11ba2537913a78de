"""``GET /api/v1/socket``: many concurrent requests over one websocket (PROTOCOL §1).

One reader loop per socket (the handler) parses each frame and starts one task per
request; each request task sends its own frames straight to the socket. A bad
frame gets an error for its id and nothing else: the socket stays open and other
requests carry on. Closing the socket cancels all of its requests.
"""
import asyncio
import json
import logging
import math
import re
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from aiohttp import WSCloseCode, WSMsgType, web

from trustgraph import tracing
from trustgraph.schema import Record

from .auth import Auth, presented_token
from .caller import Caller
from .dispatch import Dispatcher
from .errors import GatewayError, bad_request, classify, too_large
from .metrics import ERRORS, REQUESTS, SOCKETS
from .oversize import FrameTooLarge, WebSocketResponse
from .services import ServiceRow

log = logging.getLogger(__name__)

HEARTBEAT = 30.0
DEFAULT_WORKSPACE = "default"
AUTH_OK = b'{"type":"auth-ok","default_workspace":"default"}'
AUTH_FAILED = b'{"type":"auth-failed","error":"auth failure"}'
AUTH_REQUIRED = ('this gateway needs a token: send {"type":"auth","token":...} first, '
                 "or open the socket with ?token= or Authorization: Bearer")
_MORE = b',"complete":false}'
_END = b',"complete":true}'
UNDESCRIBED = (b'{"id":null,"error":{"type":"gateway-error","message":"the gateway could '
               b'not serve this frame"},"complete":true}')


@dataclass(frozen=True)
class Limits:
    max_inflight: int  # concurrent requests per socket
    max_frame: int     # bytes in one client frame


def error_frame(client_id: object, exception: BaseException,
                trace_id: str | None = None) -> bytes:
    """The one place a websocket request's failure becomes its error frame. It must
    not fail itself: an exception here would end the reader loop and so the socket."""
    try:
        error = classify(exception)
        ERRORS.labels(error.type).inc()
        return Envelope(client_id, trace_id).error(error.as_dict())
    except Exception:
        log.exception("could not describe a failure: %s", type(exception).__name__)
        return UNDESCRIBED


class SocketEndpoint:
    """The aiohttp handler; keeps the live sockets so shutdown can close them."""

    def __init__(self, dispatcher: Dispatcher, auth: Auth, limits: Limits) -> None:
        self.dispatcher = dispatcher
        self.auth = auth
        self.limits = limits
        self.live: set[web.WebSocketResponse] = set()

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        # A frame over max_frame gets a clean error from us: read and checked when
        # it is a fragmented message under aiohttp's own limit, else dropped unread
        # (oversize.py). No per-message deflate: compressing every small token frame
        # costs more CPU than it saves.
        ws = WebSocketResponse(max_frame=self.limits.max_frame, heartbeat=HEARTBEAT,
                               compress=False,
                               max_msg_size=2 * self.limits.max_frame + (1 << 20))
        await ws.prepare(request)
        self.live.add(ws)
        SOCKETS.inc()
        session = Session(ws, self, request.remote)
        session.identify(presented_token(request))
        try:
            await session.run()
        finally:
            self.live.discard(ws)
            SOCKETS.dec()
        return ws

    async def close_all(self) -> None:
        await asyncio.gather(*(ws.close(code=WSCloseCode.GOING_AWAY, message=b"shutting down")
                               for ws in list(self.live)), return_exceptions=True)


class Session:
    """One open socket: its credential and its in-flight requests by client id."""

    def __init__(self, ws: web.WebSocketResponse, endpoint: SocketEndpoint,
                 peer: str | None) -> None:
        self.ws = ws
        self.endpoint = endpoint
        self.peer = peer
        self.token: object = None  # the credential its requests are made with
        self.tasks: dict[str, asyncio.Task] = {}  # in flight, by client id
        self._running: set[asyncio.Task] = set()   # also those cancelled, until they end

    def identify(self, token: object) -> GatewayError | None:
        """Requests are made with ``token`` from now on; the error refusing it, if
        it is refused now."""
        self.token = token
        try:
            self.caller()
        except GatewayError as refused:
            return refused
        return None

    def caller(self) -> Caller:
        """Who asks: decided again for each request, so a key revoked or expired
        while the socket is open is refused from then on."""
        return self.endpoint.auth.identify(self.token, AUTH_REQUIRED, self.peer)

    async def run(self) -> None:
        try:
            async for message in self.ws:
                if message.type in (WSMsgType.TEXT, WSMsgType.BINARY):
                    await self.on_frame(message.data)
                elif isinstance(message.data, FrameTooLarge):
                    await self.on_dropped(message.data)
        finally:
            for task in self._running:
                task.cancel()
            await asyncio.gather(*self._running, return_exceptions=True)

    async def on_frame(self, data: str | bytes) -> None:
        client_id = None
        try:
            if _too_large(data, self.endpoint.limits.max_frame):
                client_id = _leading_id(data)
                raise self._too_large(len(data if isinstance(data, bytes) else data.encode()))
            frame = _parse(data)
            client_id = frame.get("id")
            await self._dispatch(frame)
        except Exception as exception:
            await self._send(error_frame(client_id, exception))

    async def on_dropped(self, dropped: FrameTooLarge) -> None:
        """A frame too large to read at all: its error, for the id in its first bytes."""
        await self._send(error_frame(_leading_id(dropped.head), self._too_large(dropped.size)))

    def _too_large(self, size: int) -> GatewayError:
        return too_large("the frame", size, self.endpoint.limits.max_frame,
                         "TG_GATEWAY_MAX_FRAME")

    async def _dispatch(self, frame: dict) -> None:
        kind = frame.get("type")
        if kind == "auth":
            await self._authenticate(frame.get("token"))
        elif kind == "cancel":
            client_id = frame.get("id")
            task = self.tasks.pop(client_id, None) if isinstance(client_id, str) else None
            if task is not None:  # the id is free again at once
                task.cancel()
        elif kind is None:
            self._start(frame)
        else:
            raise bad_request(f"type: unknown frame type {kind!r}")

    async def _authenticate(self, token: object) -> None:
        # An auth frame that names no token is a wrong one, not a missing one.
        refused = self.identify("" if token is None else token)
        if refused is None:
            await self._send(self._auth_ok())
        elif refused.status != 401:  # the keys not yet read: not a wrong key
            raise refused
        else:
            await self._send(AUTH_FAILED if refused.message == "auth failure" else
                             json.dumps({"type": "auth-failed", "error": refused.message}
                                        ).encode())

    def _auth_ok(self) -> bytes:
        """``auth-ok``, naming as the default workspace the user a key acts for (a
        client that sends it back as the envelope's ``workspace`` acts for that
        user); the gateway's own token and an open gateway name ``default``."""
        caller = self.caller()
        if caller.via in ("open", "token"):
            return AUTH_OK
        return json.dumps({"type": "auth-ok", "default_workspace": caller.user}).encode()

    def _start(self, frame: dict) -> None:
        # Only what decides whether the id is taken happens here, on the reader loop;
        # the rest of a request's setup (routing, validation, its span) is its own
        # task's, so a burst of frames puts its first request on the bus after one
        # request's setup, not after every frame's in the burst.
        client_id = frame.get("id")
        if not isinstance(client_id, str) or not client_id:
            raise bad_request("id: a non-empty string is required")
        for field in ("service", "request"):
            if field not in frame:
                raise bad_request(f"{field}: required")
        caller = self.caller()  # the credential as it is when the frame is read
        if client_id in self.tasks:
            raise GatewayError("duplicate-id", f"request {client_id!r} is still in flight", 409)
        if len(self.tasks) >= self.endpoint.limits.max_inflight:
            raise GatewayError("too-many-requests", f"this socket already has "
                               f"{len(self.tasks)} requests in flight", 429)
        task = asyncio.create_task(self._serve(client_id, frame, caller))
        self.tasks[client_id] = task
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    def _prepared(self, frame: dict) -> tuple[ServiceRow, str, Record, str]:
        """The frame's row, flow, request record and client ``traceparent``, or the
        error refusing it."""
        dispatcher = self.endpoint.dispatcher
        flow = frame.get("flow", "default")
        row = dispatcher.resolve(frame.get("service"), flow)
        record = dispatcher.prepare(row, frame["request"], _tenant(frame))
        if "flow" not in frame and "workspace" in frame:
            # TrustGraph's clients name a workspace and no flow for a service outside
            # flows, and read it as its REST path answers them
            record = row.as_global(record)
        traceparent = frame.get("traceparent", "")
        if not isinstance(traceparent, str):
            raise bad_request("traceparent: a W3C traceparent string is required")
        REQUESTS.labels(row.name, "websocket").inc()
        return row, flow, record, traceparent

    async def _serve(self, client_id: str, frame: dict, caller: Caller) -> None:
        try:
            row, flow, record, traceparent = self._prepared(frame)
        except Exception as exception:
            self._forget(client_id)  # its error frame is its last: the id is free
            await self._send(error_frame(client_id, exception))
            return
        await self._answer(client_id, row, flow, record, caller, traceparent)

    async def _answer(self, client_id: str, row: ServiceRow, flow: str, record: Record,
                      caller: Caller, traceparent: str) -> None:
        # The question's trace starts here, current in this request's own task: in
        # the client's trace, if the frame names one.
        attributes: dict[str, Any] = {tracing.names.TRANSPORT: "websocket"}
        parent = tracing.from_client(
            {tracing.TRACEPARENT: traceparent} if traceparent else {}, attributes)
        scope = tracing.open_scope(tracing.tracer("gateway"), f"websocket {row.name}",
                                   tracing.SERVER, parent=parent, attributes=attributes)
        trace_id = tracing.kept_trace_id(scope)
        envelope = Envelope(client_id, trace_id)
        send = self.ws.send_frame  # send_str without the str: the frame is already bytes
        frames = self.endpoint.dispatcher.frames(row, flow, record, caller=caller)
        try:
            async with aclosing(frames) as batches:
                async for batch in batches:
                    for data, final in batch:
                        if final:  # the id is free again once its last frame is out
                            self._forget(client_id)
                        await send(envelope.response(data, final), WSMsgType.TEXT)
        except ConnectionError:
            return  # the socket is gone; its reader loop cancels the rest
        except asyncio.CancelledError:
            if scope is not None:
                scope.cancelled()
            raise
        except Exception as exception:
            self._forget(client_id)
            if scope is not None:
                scope.failed(type(exception).__name__, str(exception))
            await self._send(error_frame(client_id, exception, trace_id))
        finally:
            self._forget(client_id)
            if scope is not None:
                scope.close()

    def _forget(self, client_id: str) -> None:
        if self.tasks.get(client_id) is asyncio.current_task():
            del self.tasks[client_id]

    async def _send(self, data: bytes) -> None:
        try:
            await self.ws.send_frame(data, WSMsgType.TEXT)
        except ConnectionError:
            pass  # the socket is closing; nobody is left to tell


class Envelope:
    """The websocket frames of one request: ``{"id", "response"|"error", "complete"}``,
    the record's JSON (already its wire form) spliced in as it is, never decoded. The
    last frame also carries the request's ``trace_id`` when it is traced."""

    __slots__ = ("_id", "_end")

    def __init__(self, client_id: object, trace_id: str | None = None) -> None:
        self._id = b'{"id":' + json.dumps(echoable(client_id)).encode()  # once per request
        self._end = _END if trace_id is None else \
            b',"complete":true,"trace_id":"%s"}' % trace_id.encode()

    def response(self, record: bytes, final: bool) -> bytes:
        return b"".join((self._id, b',"response":', record, self._end if final else _MORE))

    def error(self, error: dict[str, str]) -> bytes:
        return b"".join((self._id, b',"error":', json.dumps(error).encode(), self._end))


def echoable(client_id: object) -> str | int | float | None:
    """The id to echo: only a string or a finite number; anything else (an object,
    a list nested a thousand deep, a bool, NaN) is answered with ``null``, so
    writing the answer can neither recurse nor produce invalid JSON."""
    if isinstance(client_id, str):
        return client_id
    if isinstance(client_id, int) and not isinstance(client_id, bool):
        return client_id
    if isinstance(client_id, float) and math.isfinite(client_id):
        return client_id
    return None


def _parse(data: str | bytes) -> dict:
    try:
        frame = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise bad_request(f"frame is not valid JSON: {error}") from None
    if not isinstance(frame, dict):
        raise bad_request("frame must be a JSON object")
    return frame


def _tenant(frame: dict) -> object:
    """The user the envelope names: its ``user``, else its ``workspace``, except the
    workspace ``default``: what auth-ok names to a caller with no user of its own
    (an open gateway, the token), and what TrustGraph's clients send when told
    nothing else, which is the caller's own."""
    if "user" in frame:
        return frame["user"]
    workspace = frame.get("workspace")
    return None if workspace == DEFAULT_WORKSPACE else workspace


def _too_large(data: str | bytes, limit: int) -> bool:
    if len(data) > limit:
        return True
    # A str counts characters; only one that might exceed the limit in UTF-8 is encoded.
    return isinstance(data, str) and len(data) * 4 > limit and len(data.encode()) > limit


_LEADING_ID = re.compile(r'\s*\{\s*"id"\s*:\s*("(?:[^"\\]|\\.){0,512}")')


def _leading_id(data: str | bytes) -> object:
    """The id of an oversize frame, when it is the frame's first key (it is not parsed)."""
    head = data[:1024]
    if isinstance(head, bytes):
        head = head.decode("utf-8", "replace")
    match = _LEADING_ID.match(head)
    try:
        return json.loads(match.group(1)) if match else None
    except ValueError:
        return None
