"""The serving side of a request/response service.

A service is declared as a ``Service`` (name, record types, handler). The handler
is an async function from a request record to a response record, or an async
generator of response records; streaming and non-streaming share that one path.
Correlation, reply routing, end flags, errors and cancellation live here and in
``rpc`` (the protocol), once.
"""
import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..pubsub import Bus, Message
from ..schema import Error, Record, Response, decode, request_topic
from .metrics import SLOT_WAIT, WAITING, RequestTimer
from .relay import Delta
from .rpc import (
    BATCHED_FROM,
    ID,
    REPLY_TO,
    TIMING,
    Answered,
    Reply,
    ReplyProducers,
    RequestTimeout,
    ServiceError,
    Timing,
)

log = logging.getLogger(__name__)


Emit = Callable[[str, Record], Awaitable[None]]  # (stage, record) → durable send


async def no_emit(stage: str, record: Record) -> None:
    raise RuntimeError(f"no emitter here: cannot send to stage {stage!r}")


@dataclass
class Context:
    """What a handler knows about the request besides its record."""

    id: str
    flow: str
    clients: Any  # the processor's ``Clients`` for this flow: ``ctx.clients.get("prompt")``
    emit: Emit = no_emit  # durable send to a pipeline stage of this flow


# What a handler gives: a record (returned), or records and deltas (yielded). An item
# that is itself an async iterator of those is a sub-stream, read in its place as
# ``yield from`` would: a service passing another's answer on (``relay``) yields it
# once instead of forwarding it item by item. Returning a sub-stream does the same.
Item = Response | Delta
Handler = Callable[[Any, "Context"], Awaitable[Any] | AsyncIterator[Any]]


@dataclass(frozen=True)
class Service:
    name: str
    request: type[Record]
    response: type[Response]
    handler: Handler
    error_type: str = ""  # the ``error.type`` for unexpected failures
    close: Callable[[], Awaitable[None]] | None = None  # releases what the handler holds

    @property
    def failure_type(self) -> str:
        return self.error_type or f"{self.name}-error"


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


class Items:
    """What a handler gave, as one stream of items: the record it returned, or what it
    yields, sub-streams read in their place (an exception one raises is thrown back
    into the generator that yielded it, as ``yield from`` does). ``aclose`` closes
    every generator open in it, innermost first."""

    __slots__ = ("_result", "_open")

    def __init__(self, result: Awaitable[Any] | AsyncIterator[Any]) -> None:
        self._result: Any = result
        self._open: list[AsyncIterator[Any]] = []  # the generator reading now is last

    def __aiter__(self) -> "Items":
        return self

    async def __anext__(self) -> Item:
        if self._result is not None:  # the first item
            result, self._result = self._result, None
            if inspect.isawaitable(result):
                result = await result
            if not isinstance(result, AsyncIterator):
                return result
            self._open.append(result)
        thrown: Exception | None = None
        while self._open:
            reading = self._open[-1]
            try:
                if thrown is None:
                    item = await anext(reading)
                else:  # what the sub-stream it yielded raised, raised where it yielded
                    item = await reading.athrow(thrown)  # type: ignore[attr-defined]
            except StopAsyncIteration:
                self._open.pop()
                thrown = None
                continue
            except Exception as error:
                self._open.pop()
                if not self._open:
                    raise
                thrown = error
                continue
            if isinstance(item, Delta | Response) or not isinstance(item, AsyncIterator):
                return item  # (the common case first: ABCs check slowly)
            self._open.append(item)
            thrown = None
        raise StopAsyncIteration

    async def aclose(self) -> None:
        if inspect.iscoroutine(self._result):  # never started
            self._result.close()
        elif self._result is not None:
            self._open.append(self._result)
        self._result = None
        while self._open:
            reading = self._open.pop()
            close = getattr(reading, "aclose", None)
            if close is not None:
                await close()


class ServiceRunner:
    """Serves one ``Service`` on one flow: receive, run the handler, reply."""

    def __init__(self, bus: Bus, service: Service, flow: str, runtime: Any,
                 inflight: dict[str, asyncio.Task], limit: asyncio.Semaphore,
                 backlog: int, replies: ReplyProducers, timing: Timing = TIMING) -> None:
        self.service = service
        self.flow = flow
        self.timing = timing
        self._bus = bus
        # ``runtime`` is the processor's ``Runtime`` (None: a handler that calls nothing)
        self._clients = runtime.clients(flow) if runtime is not None else None
        self._emit = partial(runtime.emit, flow) if runtime is not None else no_emit
        self._inflight = inflight
        self._open: dict[str, Reply] = {}  # replies of the requests being served
        self._answered = Answered()
        self._limit = limit  # requests handled at once
        self._backlog = backlog  # requests held (handled or waiting), then refused
        self._replies = replies

    async def start(self) -> None:
        await self._bus.consume(request_topic(self.service.name, self.flow),
                                self.service.name, self._accept,
                                name=f"requests {self.service.name}:{self.flow}")

    async def _accept(self, message: Message) -> None:
        """Never waits: the request is taken (its requester hears ``accepted``, or the
        first record, within ``timing.accept_after``) or refused as overloaded."""
        properties = message.properties()
        request_id, reply_to = properties.get(ID), properties.get(REPLY_TO)
        if not request_id or not reply_to:
            log.warning("%s: request without id or reply-to dropped", self.service.name)
            return
        if request_id in self._inflight or request_id in self._answered:
            return  # a re-send of a request this process has, or has answered
        batched = len(self._inflight) >= BATCHED_FROM
        self._take(message.data(), request_id,
                   partial(self._replies.reply, reply_to, self.service.response, request_id,
                           batched))

    def serve_local(self, data: bytes, request_id: str, reply: Reply) -> asyncio.Task:
        """Serve a request made in this process (``LocalRequester``), answering into
        ``reply``: the same backlog, concurrency limit, handler and errors as a request
        from the bus, and cancellable by id on the cancel topic like one."""
        async def opened() -> Reply:
            return reply
        return self._take(data, request_id, opened)

    def _take(self, data: bytes, request_id: str,
              open_reply: Callable[[], Awaitable[Reply]]) -> asyncio.Task:
        overloaded = len(self._inflight) >= self._backlog
        task = asyncio.create_task(
            self._refuse(open_reply) if overloaded else
            self._serve(data, request_id, open_reply))
        self._inflight[request_id] = task
        task.add_done_callback(lambda _: self._done(request_id))
        return task

    def _done(self, request_id: str) -> None:
        self._inflight.pop(request_id, None)
        self._answered.add(request_id)

    async def _refuse(self, open_reply: Callable[[], Awaitable[Reply]]) -> None:
        reply = await open_reply()
        await reply.send(self.service.response.failure(Error(
            type="overloaded", message=f"{self.service.name} has {self._backlog} requests "
                                       f"in hand; try again shortly")), True)

    async def keep_alive(self) -> None:
        """A sign of life to the requester of each request that sent nothing since the
        last call (every ``timing.keep_alive``)."""
        for reply in list(self._open.values()):
            try:
                await reply.keep_alive()
            except Exception as error:  # the broker away: the next round tries again
                log.debug("%s: keep-alive not sent: %s", self.service.name, error)

    async def _slot(self, request_id: str) -> None:
        """One of the TG_CONCURRENCY slots; a request that has to wait for one says so
        (log, and the tg_requests_waiting / tg_slot_wait_seconds metrics): streams
        that queue are otherwise only slow, with nothing in the log to say why."""
        if not self._limit.locked():
            await self._limit.acquire()
            return
        name = self.service.name
        log.info("id=%s %s waits for a slot: all TG_CONCURRENCY slots are busy", request_id,
                 name)
        started = time.perf_counter()
        WAITING.labels(name).inc()
        try:
            await self._limit.acquire()
        finally:
            WAITING.labels(name).dec()
            SLOT_WAIT.labels(name).observe(time.perf_counter() - started)

    async def _serve(self, data: bytes, request_id: str,
                     open_reply: Callable[[], Awaitable[Reply]]) -> None:
        started = time.perf_counter()
        timer = RequestTimer(self.service.name)
        reply = None
        sent_final = holding = False
        first = True
        try:
            reply = await open_reply()
            self._open[request_id] = reply
            reply.open(self.timing)
            await self._slot(request_id)
            holding = True
            request = decode(self.service.request, data)
            ctx = Context(request_id, self.flow, self._clients, self._emit)
            # aclosing: a cancel closes the handler (and its LLM stream) at once.
            async with aclosing(Items(self.service.handler(request, ctx))) as items:
                async for item in items:
                    sent_final = not isinstance(item, Delta) and item.is_final()
                    await reply.send(item, sent_final)
                    if first:
                        timer.responded()  # time to first response
                        first = False
                    if sent_final:
                        break
            if not sent_final:
                raise RuntimeError("handler ended without a final record")
        except asyncio.CancelledError:
            log.info("id=%s %s cancelled", request_id, self.service.name)
            raise
        except Exception as exception:
            error = error_for(self.service, exception)
            timer.failed()
            log.warning("id=%s %s failed: %s: %s", request_id, self.service.name,
                        error.type, error.message)
            if reply is not None and not sent_final:
                await reply.send(self.service.response.failure(error), True)
        finally:
            if reply is not None:
                reply.close()
            self._open.pop(request_id, None)
            if holding:
                self._limit.release()
            timer.done()
            log.debug("id=%s %s done in %.1f ms", request_id, self.service.name,
                      (time.perf_counter() - started) * 1000)
