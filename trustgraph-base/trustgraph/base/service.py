"""The serving side of a request/response service.

A service is declared as a ``Service`` (name, record types, handler). The handler
is an async function from a request record to a response record, or an async
generator of response records; streaming and non-streaming share that one path.
Correlation, reply routing, end flags, errors and cancellation live here, once.
"""
import asyncio
import inspect
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from ..pubsub import Bus, Message
from ..schema import Error, Record, Response, decode, encode, request_topic
from .metrics import SLOT_WAIT, WAITING, RequestTimer

log = logging.getLogger(__name__)

# Answered request ids remembered, so a re-send that arrives after the answer (the
# requester re-sends until it hears "accepted") is not served twice.
REMEMBERED_IDS = 4096
# How often a request still being served that has sent nothing since the last time
# tells its requester so (an ``accepted`` marker again). Responses travel on
# non-persistent topics, which drop what is in flight when the broker restarts; the
# requester takes a long silence (``requester.LIVENESS``) as its answer lost, rather
# than waiting out TG_REQUEST_TIMEOUT for a record that will never come.
KEEP_ALIVE_INTERVAL = 2.0
# How long a request may go without a record before its requester is told that a
# replica has it (the ``accepted`` marker). A requester takes the first record as
# acceptance too, so a request answered sooner (a store query, an embedding, RAG's
# sources) sends no marker: that was a message and a wake-up of the requester's
# process on every hop of a RAG answer's path to the LLM (~2-4 ms in all). Well
# under the requester's re-send interval (``requester.RESEND_INTERVAL``, 1 s), so a
# request is never sent again because its marker was deferred.
ACCEPT_AFTER = 0.05


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


Handler = Callable[[Any, Context], Awaitable[Response] | AsyncIterator[Response]]


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
    """The one place an exception becomes a wire error."""
    if isinstance(exception, HandledError):
        return Error(type=exception.type, message=exception.message)
    if isinstance(exception, ValueError):  # includes pydantic's ValidationError
        return Error(type="bad-request", message=str(exception))
    return Error(type=service.failure_type, message=f"{type(exception).__name__}: {exception}")


class ServiceRunner:
    """Serves one ``Service`` on one flow: receive, run the handler, reply."""

    def __init__(self, bus: Bus, service: Service, flow: str, runtime: Any,
                 inflight: dict[str, asyncio.Task], limit: asyncio.Semaphore,
                 backlog: int, replies: "ReplyProducers") -> None:
        self.service = service
        self.flow = flow
        self._bus = bus
        # ``runtime`` is the processor's ``Runtime`` (None: a handler that calls nothing)
        self._clients = runtime.clients(flow) if runtime is not None else None
        self._emit = partial(runtime.emit, flow) if runtime is not None else no_emit
        self._inflight = inflight
        self._open: dict[str, Reply] = {}  # replies of the requests being served
        self._finished: OrderedDict[str, None] = OrderedDict()  # ids answered lately
        self._limit = limit  # requests handled at once
        self._backlog = backlog  # requests held (handled or waiting), then refused
        self._replies = replies
        self._markers: set[asyncio.Task] = set()  # deferred ``accepted`` markers being sent

    async def start(self) -> None:
        await self._bus.consume(request_topic(self.service.name, self.flow),
                                self.service.name, self._accept,
                                name=f"requests {self.service.name}:{self.flow}")

    async def _accept(self, message: Message) -> None:
        """Never waits: the request is taken (its requester hears ``accepted``, or the
        first record, within ``ACCEPT_AFTER``) or refused as overloaded."""
        properties = message.properties()
        request_id, reply_to = properties.get("id"), properties.get("reply-to")
        if not request_id or not reply_to:
            log.warning("%s: request without id or reply-to dropped", self.service.name)
            return
        if request_id in self._inflight or request_id in self._finished:
            return  # a re-send of a request this process has, or has answered
        self._take(message.data(), request_id,
                   lambda: self._replies.reply(reply_to, request_id))

    def serve_local(self, data: bytes, request_id: str, reply: "Reply") -> asyncio.Task:
        """Serve a request made in this process (``LocalRequester``), answering into
        ``reply``: the same backlog, concurrency limit, handler and errors as a request
        from the bus, and cancellable by id on the cancel topic like one."""
        async def opened() -> Reply:
            return reply
        return self._take(data, request_id, opened)

    def _take(self, data: bytes, request_id: str, open_reply: "OpenReply") -> asyncio.Task:
        overloaded = len(self._inflight) >= self._backlog
        task = asyncio.create_task(
            self._refuse(open_reply) if overloaded else
            self._serve(data, request_id, open_reply))
        self._inflight[request_id] = task
        task.add_done_callback(lambda _: self._done(request_id))
        return task

    def _done(self, request_id: str) -> None:
        self._inflight.pop(request_id, None)
        self._finished[request_id] = None
        if len(self._finished) > REMEMBERED_IDS:
            self._finished.popitem(last=False)

    async def _refuse(self, open_reply: "OpenReply") -> None:
        reply = await open_reply()
        await reply.send(self.service.response.failure(Error(
            type="overloaded", message=f"{self.service.name} has {self._backlog} requests "
                                       f"in hand; try again shortly")), True)

    def _mark_accepted(self, reply: "Reply") -> None:
        """The ``accepted`` marker of a request that has sent no record yet."""
        task = asyncio.ensure_future(self._send_marker(reply))
        self._markers.add(task)
        task.add_done_callback(self._markers.discard)

    async def _send_marker(self, reply: "Reply") -> None:
        try:
            await reply.accept()
        except Exception as error:  # the broker away: keep-alives and re-sends follow
            log.debug("%s: accepted marker not sent: %s", self.service.name, error)

    async def keep_alive(self) -> None:
        """A sign of life to the requester of each request that sent nothing since the
        last call (``KEEP_ALIVE_INTERVAL``)."""
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

    async def _serve(self, data: bytes, request_id: str, open_reply: "OpenReply") -> None:
        started = time.perf_counter()
        timer = RequestTimer(self.service.name)
        reply = None
        sent_final = holding = False
        marker = None
        try:
            reply = await open_reply()
            self._open[request_id] = reply
            marker = asyncio.get_running_loop().call_later(ACCEPT_AFTER, self._mark_accepted,
                                                              reply)
            await self._slot(request_id)
            holding = True
            request = decode(self.service.request, data)
            ctx = Context(request_id, self.flow, self._clients, self._emit)
            # aclosing: a cancel closes the handler (and its LLM stream) at once.
            async with aclosing(_records(self.service.handler(request, ctx))) as records:
                async for record in records:
                    marker.cancel()
                    timer.responded()
                    sent_final = record.is_final()
                    await reply.send(record, sent_final)
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
            if marker is not None:
                marker.cancel()
            self._open.pop(request_id, None)
            if holding:
                self._limit.release()
            timer.done()
            log.debug("id=%s %s done in %.1f ms", request_id, self.service.name,
                      (time.perf_counter() - started) * 1000)


async def _records(result: Awaitable[Response] | AsyncIterator[Response]
                   ) -> AsyncGenerator[Response, None]:
    if isinstance(result, AsyncGenerator):
        try:
            async for record in result:
                yield record
        finally:
            await result.aclose()
    elif inspect.isawaitable(result):
        yield await result


class ReplyProducers:
    """One producer per reply topic, created on first use and kept."""

    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        self._producers: dict[str, asyncio.Future] = {}

    async def reply(self, topic: str, request_id: str) -> "BusReply":
        if topic not in self._producers:
            self._producers[topic] = asyncio.ensure_future(self._bus.producer(topic))
        try:
            producer = await asyncio.shield(self._producers[topic])
        except Exception:
            self._producers.pop(topic, None)
            raise
        return BusReply(producer, request_id)


class Reply(Protocol):
    """Where the records answering one request go: over the bus (``BusReply``) or,
    for a request made in this process, straight to its requester (``LocalReply``)."""

    async def accept(self) -> None: ...

    async def send(self, record: Response, final: bool) -> None: ...

    async def keep_alive(self) -> None: ...


OpenReply = Callable[[], Awaitable[Reply]]


class BusReply:
    """The responses to one request: an ``accepted`` marker, then records numbered by
    ``seq`` so the requester notices any lost in transit; the last marked ``end``."""

    __slots__ = ("_producer", "_id", "_seq", "_seq_kept")

    def __init__(self, producer, request_id: str) -> None:
        self._producer = producer
        self._id = request_id
        self._seq = 0
        self._seq_kept = 0  # ``_seq`` at the last keep-alive

    async def accept(self) -> None:
        await self._producer.post(b"", {"id": self._id, "accepted": "1"})

    async def keep_alive(self) -> None:
        """``accepted`` again, unless records went out since the last keep-alive."""
        if self._seq == self._seq_kept:
            await self.accept()
        self._seq_kept = self._seq

    async def send(self, record: Response, final: bool) -> None:
        properties = {"id": self._id, "seq": str(self._seq)}
        self._seq += 1
        if final:
            properties["end"] = "1"
            await self._producer.send(encode(record), properties)
        else:
            await self._producer.post(encode(record), properties)
