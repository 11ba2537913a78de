"""The serving side of a request/response service, and the contract of its handler.

A service is declared as ``Service(name, Req, Resp, handler)``. Its handler, a
``Handler[Req, Resp]``, takes the request record and a ``Context`` and either

* returns one ``Resp`` record (a non-streaming answer), or ``Relay(stream)``; or
* is an async generator yielding ``Resp`` records, ``Delta``s (its answer's text,
  written as ``Resp``'s delta record when it leaves the process) and ``Relay(stream)``s
  (a sub-stream: another service's answer relayed, a part written as a generator of
  its own), ending with a final record.

Nothing else is read: an async iterator yielded or returned without ``Relay`` is a
``TypeError``, as is anything that is not a record or a ``Delta``. Streaming and
non-streaming share that one path. Correlation, reply routing, end flags, errors and
cancellation live here and in ``rpc`` (the protocol), once.
"""
import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from .. import tracing
from ..pubsub import Bus, Message
from ..pubsub.bus import Consumer
from ..schema import Error, Record, Response, decode, request_topic
from .clients import Clients
from .flows import Parameters
from .items import Items, Relay, Yielded
from .lanes import LANE, Lane, Slots, current_lane, lane_of, serving, set_lane
from .metrics import SLOT_WAIT, WAITING, RequestTimer
from .relay import Delta
from .reply import BATCHED_FROM, Answered, Kept, Reply, ReplyProducers
from .rpc import ID, PROBE, REPLY_TO, SEQ, TIMING, RequestTimeout, ServiceError, Timing
from .runtime import Runtime

log = logging.getLogger(__name__)

Req = TypeVar("Req", bound=Record)
Resp = TypeVar("Resp", bound=Response)

Emit = Callable[[str, Record], Awaitable[None]]  # (stage, record) → durable send


async def no_emit(stage: str, record: Record) -> None:
    raise RuntimeError(f"no emitter here: cannot send to stage {stage!r}")


@dataclass
class Context:
    """What a handler knows about the request besides its record."""

    id: str
    flow: str
    clients: Clients  # the services it may call on this flow: ``ctx.clients.get("prompt")``
    emit: Emit = no_emit  # durable send to a pipeline stage of this flow
    # the flow's parameters: ``ctx.parameters.of(Model)`` (base/flows.py)
    parameters: Parameters = field(default_factory=lambda: Parameters(""))


# A handler: returns a record (or relays a stream), or is an async generator.
Handler = Callable[[Req, Context],
                   Awaitable[Resp | Relay[Resp]] | AsyncIterator[Yielded[Resp]]]


class Service:
    """A request/response service: its name, its record types and its handler.

    mypy checks ``handler`` against ``request`` and ``response`` where the service
    is made. That is why the constructor is generic and the class is not: a list of
    services of different types (what a processor's factory returns) would read a
    generic class as ``Service[Any, Any]`` and check none of them."""

    __slots__ = ("name", "request", "response", "handler", "error_type", "close",
                 "global_flow")

    def __init__(self, name: str, request: type[Req], response: type[Resp],
                 handler: Handler[Req, Resp], error_type: str = "",
                 close: Callable[[], Awaitable[None]] | None = None,
                 global_flow: str | None = None) -> None:
        self.name = name
        self.request: type[Record] = request
        self.response: type[Response] = response
        self.handler: Handler[Any, Any] = handler
        self.error_type = error_type  # the ``error.type`` for unexpected failures
        self.close = close  # releases what the handler holds
        # A service outside flows (config, keys, the librarian, flow): served on this
        # flow only, whichever flows run.
        self.global_flow = global_flow

    @property
    def failure_type(self) -> str:
        return self.error_type or f"{self.name}-error"

    def __repr__(self) -> str:
        return f"Service({self.name!r}, {self.request.__name__}, {self.response.__name__})"


class HandledError(Exception):
    """Raised by handlers for an expected failure: becomes ``Error(type, message)``."""

    def __init__(self, type: str, message: str) -> None:
        super().__init__(message)
        self.type = type
        self.message = message


class BadRequest(HandledError):
    """The request itself is wrong (a missing or malformed field): ``bad-request``."""

    def __init__(self, message: str) -> None:
        super().__init__("bad-request", message)


def error_for(service: Service, exception: BaseException) -> Error:
    """The one place an exception becomes a wire error. A service called on the way
    that failed (``ServiceError``) is passed on as it said it."""
    if isinstance(exception, HandledError):
        return Error(type=exception.type, message=exception.message)
    if isinstance(exception, ServiceError):
        return exception.error
    if isinstance(exception, ValueError):  # includes pydantic's ValidationError
        return Error(type="bad-request", message=str(exception))
    if isinstance(exception, RequestTimeout):
        return Error(type=service.failure_type, message=str(exception))
    return Error(type=service.failure_type, message=f"{type(exception).__name__}: {exception}")


class ServiceRunner:
    """Serves one ``Service`` on one flow: receive, run the handler, reply. Each
    request is served in its lane (``lanes``): it waits for a slot by lane, and its
    handler's own requests go in that lane."""

    def __init__(self, bus: Bus, service: Service, flow: str, runtime: Runtime,
                 inflight: dict[str, asyncio.Task], limit: Slots,
                 backlog: int, replies: ReplyProducers, timing: Timing = TIMING,
                 parameters: Parameters | None = None) -> None:
        self.service = service
        self.flow = flow
        self.parameters = parameters or Parameters(flow)  # replaced as the flow changes
        self.timing = timing
        self._bus = bus
        self._clients = runtime.clients(flow)
        self._emit: Emit = partial(runtime.emit, flow)
        self._inflight = inflight
        self._open: dict[str, Reply] = {}  # replies of the requests being served
        self._answered = Answered()
        self._kept = Kept(timing.kept_for)  # answers to send again, should they be lost
        self._limit = limit  # requests handled at once, shared by the processor's runners
        self._backlog = backlog  # requests held (handled or waiting), then refused
        self._replies = replies
        self._tracer = tracing.tracer(runtime.name)  # None: this process is not traced
        self._consumer: Consumer | None = None
        self._taken = 0  # requests taken and not yet ended
        self.waiting = 0  # requests waiting for a slot (its processor's state record)

    async def start(self) -> None:
        self._consumer = await self._bus.consume(
            request_topic(self.service.name, self.flow), self.service.name, self._accept,
            name=f"requests {self.service.name}:{self.flow}", replicated=True)

    async def stop(self) -> None:
        """Take no more requests (the flow stopped); those in hand are answered."""
        if self._consumer is not None:
            consumer, self._consumer = self._consumer, None
            await self._bus.release(consumer)

    @property
    def answering(self) -> bool:
        """Whether requests it took are still being answered."""
        return self._taken > 0

    async def _accept(self, message: Message) -> None:
        """Never waits: the request is taken (its requester hears ``accepted``, or the
        first record, within ``timing.accept_after``) or refused as overloaded."""
        properties = message.properties()
        request_id, reply_to = properties.get(ID), properties.get(REPLY_TO)
        if not request_id or not reply_to:
            log.warning("%s: request without id or reply-to dropped", self.service.name)
            return
        if request_id in self._inflight or request_id in self._answered:
            # Asked again (a re-send, a probe): served once, but answered again.
            self._asked_again(request_id, properties.get(SEQ, ""))
            return
        if properties.get(PROBE):
            return  # after a request this process never had: another replica has it
        batched = len(self._inflight) >= BATCHED_FROM
        self._take(message.data(), request_id,
                   partial(self._replies.reply, reply_to, self.service.response, request_id,
                           batched), lane_of(properties.get(LANE)),
                   tracing.extract(properties))

    def _asked_again(self, request_id: str, seq: str) -> None:
        """Its requester heard nothing lately, and has ``seq`` records: a request in
        hand is marked accepted, an answer lost is sent again (if kept)."""
        reply = self._open.get(request_id) or self._kept.get(request_id)
        if reply is not None:
            reply.again(int(seq) if seq.isdecimal() else 0)

    def serve_local(self, data: bytes, request_id: str, reply: Reply) -> asyncio.Task:
        """Serve a request made in this process (``LocalRequester``), answering into
        ``reply``: the same backlog, concurrency limit, handler and errors as a request
        from the bus, and cancellable by id on the cancel topic like one; in the lane
        of the work asking it. Its span is the caller's child: the serving task starts
        in the caller's context."""
        async def opened() -> Reply:
            return reply
        return self._take(data, request_id, opened, current_lane())

    def _take(self, data: bytes, request_id: str, open_reply: Callable[[], Awaitable[Reply]],
              lane: Lane, parent: tracing.Context | None = None) -> asyncio.Task:
        """``parent``: the trace context the request came with over the bus."""
        overloaded = len(self._inflight) >= self._backlog
        task = asyncio.create_task(
            self._refuse(request_id, open_reply) if overloaded else
            self._serve(data, request_id, open_reply, lane, parent))
        self._inflight[request_id] = task
        self._taken += 1
        task.add_done_callback(lambda _: self._done(request_id))
        return task

    def _done(self, request_id: str) -> None:
        self._taken -= 1
        self._inflight.pop(request_id, None)
        self._answered.add(request_id)

    async def _refuse(self, request_id: str,
                      open_reply: Callable[[], Awaitable[Reply]]) -> None:
        reply = await open_reply()
        await reply.send(self.service.response.failure(Error(
            type="overloaded", message=f"{self.service.name} has {self._backlog} requests "
                                       f"in hand; try again shortly")), True)
        self._kept.add(request_id, reply)

    async def keep_alive(self) -> None:
        """A sign of life to the requester of each request that sent nothing since the
        last call (every ``timing.keep_alive``)."""
        for reply in list(self._open.values()):
            try:
                await reply.keep_alive()
            except Exception as error:  # the broker away: the next round tries again
                log.debug("%s: keep-alive not sent: %s", self.service.name, error)

    async def _slot(self, request_id: str, lane: Lane, reply: Reply) -> None:
        """One of the TG_CONCURRENCY slots, by lane; a request that has to wait for
        one says so (log, span, the tg_requests_waiting / tg_slot_wait_seconds metrics, and
        ``queued`` to its requester): streams that queue are otherwise only slow,
        with nothing in the log to say why."""
        if self._limit.available(lane):
            await self._limit.acquire(lane)
            return
        name = self.service.name
        log.info("id=%s %s waits for a slot: the TG_CONCURRENCY slots %s may take are busy",
                 request_id, name, f"{lane} work")
        started = time.perf_counter()
        WAITING.labels(name).inc()
        self.waiting += 1
        reply.queued += 1
        try:
            await self._limit.acquire(lane)
        finally:
            self.waiting -= 1
            reply.queued -= 1
            WAITING.labels(name).dec()
            waited = time.perf_counter() - started
            SLOT_WAIT.labels(name).observe(waited)
            tracing.note(tracing.names.SLOT_WAIT_MS, round(waited * 1000, 3))

    async def _serve(self, data: bytes, request_id: str,
                     open_reply: Callable[[], Awaitable[Reply]], lane: Lane,
                     parent: tracing.Context | None) -> None:
        set_lane(lane)  # this task's own context: the handler's requests go in it too
        started = time.perf_counter()
        timer = RequestTimer(self.service.name)
        scope = self._scope(request_id, parent)
        reply = None
        sent_final = holding = False
        first, token = True, scope is not None  # the first token still to be timed
        try:
            reply = await open_reply()
            self._open[request_id] = reply
            serving(reply)
            reply.open(self.timing)
            await self._slot(request_id, lane, reply)
            holding = True
            request = decode(self.service.request, data)
            if scope is not None:
                tracing.describe(scope.span, request)
            ctx = Context(request_id, self.flow, self._clients, self._emit,
                          self.parameters)
            # aclosing: a cancel closes the handler (and its LLM stream) at once.
            async with aclosing(Items(self.service.handler(request, ctx))) as items:
                async for item in items:
                    sent_final = not isinstance(item, Delta) and item.is_final()
                    await reply.send(item, sent_final)
                    if first:
                        timer.responded()  # time to first response
                        first = False
                        if scope is not None:
                            scope.mark(tracing.names.FIRST_RESPONSE_MS)
                    if token and isinstance(item, Delta):  # timed once, as the first is
                        token = False
                        scope.mark(tracing.names.FIRST_TOKEN_MS)  # type: ignore[union-attr]
                    if sent_final:
                        break
            if not sent_final:
                raise RuntimeError("handler ended without a final record")
        except asyncio.CancelledError:
            log.info("id=%s %s cancelled", request_id, self.service.name)
            if scope is not None:
                scope.cancelled()
            raise
        except Exception as exception:
            await self._failed(exception, request_id, timer, scope,
                               None if sent_final else reply)
        finally:
            if reply is not None:
                reply.close()
                self._kept.add(request_id, reply)  # once answered (kept_bytes says)
            self._open.pop(request_id, None)
            if holding:
                self._limit.release(lane)
            timer.done()
            log.debug("id=%s %s done in %.1f ms", request_id, self.service.name,
                      (time.perf_counter() - started) * 1000)
            if scope is not None:
                scope.close()

    def _scope(self, request_id: str, parent: tracing.Context | None) -> tracing.Scope | None:
        """The request's span, current while it is served (None: not traced)."""
        name = self.service.name
        return tracing.open_scope(self._tracer, name, tracing.SERVER, parent, {
            tracing.names.SERVICE: name, tracing.names.FLOW: self.flow,
            tracing.names.REQUEST_ID: request_id,
            tracing.names.SPAN_KIND: tracing.names.KINDS.get(name, tracing.names.CHAIN)})

    async def _failed(self, exception: Exception, request_id: str, timer: RequestTimer,
                      scope: tracing.Scope | None, reply: Reply | None) -> None:
        """A request that failed: counted, logged, its span marked, and its error sent
        as its final record (``reply``; None once its final record went out)."""
        error = error_for(self.service, exception)
        timer.failed()
        log.warning("id=%s %s failed: %s: %s", request_id, self.service.name,
                    error.type, error.message)
        if scope is not None:
            scope.failed(error.type, error.message)
        if reply is not None:
            await reply.send(self.service.response.failure(error), True)
