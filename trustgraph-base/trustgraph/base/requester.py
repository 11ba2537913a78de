"""The requesting side of a request/response service.

One ``Requester`` per (service, flow) per process. It owns a response topic of its
own (so responses reach only the process that asked), one receive loop that routes
each response to the waiting request by the message property ``id``, and the
cancel that goes out when a caller stops listening before the final record.
"""
import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import TypeVar

from ..pubsub import Bus, Message
from ..pubsub.bus import Producer
from ..schema import (
    CANCEL_TOPIC,
    Cancel,
    Error,
    Record,
    Response,
    decode,
    encode,
    request_topic,
    response_topic,
)
from .service import KEEP_ALIVE_INTERVAL

log = logging.getLogger(__name__)

R = TypeVar("R", bound=Response)

# Responses waiting for a caller that has stopped reading; past this the request
# fails rather than holding memory for a reader that is not there.
MAX_PENDING_RESPONSES = 10_000
# The broker drops a non-persistent message for a consumer with no receive permits
# left, so a response consumer gets a deep prefetch queue: a burst of deltas while
# this process is busy waits in the client instead of being lost.
RESPONSE_PREFETCH = 50_000
# How often a request that no replica has accepted yet is sent again.
RESEND_INTERVAL = 1.0
# A service keeps telling a requester it still has the request while it sends
# nothing (every KEEP_ALIVE_INTERVAL); this long without a word from it means its
# records were lost in transit (a broker restart) or it stopped.
LIVENESS = 5 * KEEP_ALIVE_INTERVAL
# A service that answered this requester this recently is running: when it is slow
# to take a request (its process starved of CPU beside heavy work, or stopped a
# while), the request waits for it up to BUSY_ACCEPT_TIMEOUT, re-sent every
# RESEND_INTERVAL, rather than failing as ``no-service`` after ``accept_timeout``
# (graph questions ended in that error beside a CPU-heavy neighbour: issue 22).
# Bounded well under TG_REQUEST_TIMEOUT: a request lost with a broker restart is
# still given up soon enough for its stage to send it again (test_ingest_kill).
RECENTLY_HEARD = 60.0
BUSY_ACCEPT_TIMEOUT = 20.0

Frame = tuple[bytes, bool]  # (record JSON, is the final record)


class RequestTimeout(Exception):
    pass


class ServiceError(Exception):
    """A service answered with ``error``; ``error`` holds its type and message."""

    def __init__(self, error: Error) -> None:
        super().__init__(f"{error.type}: {error.message}")
        self.error = error


class Pending:
    """Responses that arrived for one request and not yet read, in order.

    Every response carries a sequence number (property ``seq``); a gap means records
    were lost in transit (non-persistent topics drop what is in flight when the
    broker restarts), and the request fails rather than returning text with holes.
    """

    __slots__ = ("frames", "arrived", "expected", "failure", "accepted", "alive_at",
                 "_deadline", "_timer", "_expired")

    def __init__(self) -> None:
        self.frames: deque[Frame] = deque()
        self.arrived = asyncio.Event()
        self.expected = 0
        self.failure: Exception | None = None
        self.accepted = False  # a replica has the request
        self.alive_at = 0.0  # when the service last said it still has it
        # The wait's deadline is checked by one timer that is moved only when it
        # fires early, not set and cancelled for every wait: a stream waits once
        # per delta, and a timeout per wait cost ~4 µs of a delta's ~40-60 µs in
        # the gateway.
        self._deadline = 0.0  # loop time
        self._timer: asyncio.TimerHandle | None = None
        self._expired = False

    def accept(self) -> None:
        self.accepted = True
        self.alive_at = time.monotonic()
        self.arrived.set()

    def put(self, frame: Frame, seq: int | None) -> None:
        if self.failure is not None:
            return
        if seq is not None and seq != self.expected:
            self.fail(ServiceError(Error(
                type="responses-lost",
                message=f"{seq - self.expected} response record(s) lost in transit "
                        f"(was the broker restarted?)")))
            return
        self.expected += 1
        self.accepted = True
        if len(self.frames) >= MAX_PENDING_RESPONSES:
            self.fail(ServiceError(Error(type="overflow",
                                         message="the caller is not reading its responses")))
            return
        self.frames.append(frame)
        self.arrived.set()

    def fail(self, error: Exception) -> None:
        self.failure = error
        self.arrived.set()

    async def batch(self, timeout: float) -> list[Frame]:
        """Everything that has arrived, waiting up to ``timeout`` for something
        (``TimeoutError`` when nothing came); empty when what arrived was only the
        ``accepted`` marker."""
        if not self.frames:
            if self.failure is not None:
                raise self.failure
            self.arrived.clear()
            self._expired = False
            loop = asyncio.get_running_loop()
            self._deadline = loop.time() + timeout
            if self._timer is None or self._timer.when() > self._deadline:
                self._arm(loop)
            await self.arrived.wait()
            if self._expired and not self.frames:
                raise TimeoutError
            if not self.frames and self.failure is not None:
                raise self.failure
        batch = list(self.frames)
        self.frames.clear()
        return batch

    def close(self) -> None:
        """The request is over: its deadline timer goes."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        self.close()
        self._timer = loop.call_at(self._deadline, self._check_deadline, loop)

    def _check_deadline(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        if loop.time() < self._deadline:  # the wait after a later record: not yet
            self._arm(loop)
        elif not self.arrived.is_set():
            self._expired = True
            self.arrived.set()


class Calls:
    """``stream`` and ``call``, built on a ``frames`` method: shared by the bus
    ``Requester`` and the in-process ``LocalRequester``, so callers see one interface
    and one way of decoding records and raising their errors."""

    def frames(self, request: Record, request_id: str | None = None
               ) -> AsyncGenerator[list[Frame], None]:
        raise NotImplementedError

    async def stream(self, request: Record, model: type[R],
                     request_id: str | None = None) -> AsyncGenerator[R, None]:
        """Yield decoded response records; a record carrying ``error`` raises
        ``ServiceError`` after nothing else could follow it."""
        async with aclosing(self.frames(request, request_id)) as batches:
            async for batch in batches:
                for data, _ in batch:
                    record = decode(model, data)
                    if record.error is not None:
                        raise ServiceError(record.error)
                    yield record

    async def call(self, request: Record, model: type[R]) -> R:
        """One request, its final record (non-streaming use)."""
        last = None
        async for last in self.stream(request, model):  # noqa: B007 (only the last is kept)
            pass
        assert last is not None  # a stream ends with its final record, or raises
        return last


def silence(service: str, flow: str, timeout: float) -> RequestTimeout:
    """The error for a service that has the request but went quiet."""
    return RequestTimeout(f"{service} on flow {flow} sent nothing for {timeout:g} s")


class Requester(Calls):
    def __init__(self, bus: Bus, service: str, flow: str, requester_id: str,
                 timeout: float = 120.0, accept_timeout: float = 5.0,
                 liveness: float = LIVENESS) -> None:
        self.service = service
        self.flow = flow
        self.timeout = timeout  # longest time between records once a replica has it
        self.liveness = liveness  # longest time without a word, keep-alives included
        # A request on a non-persistent topic that no replica is subscribed to is
        # dropped silently; without an ``accepted`` by then, nothing is serving it.
        self.accept_timeout = accept_timeout
        self._bus = bus
        self._request_topic = request_topic(service, flow)
        self._reply_to = response_topic(service, flow, requester_id)
        self._subscription = requester_id
        self._pending: dict[str, Pending] = {}
        self._heard_at: float | None = None  # when a replica last answered anything
        self._cancels: set[asyncio.Task] = set()
        self._producer: Producer | None = None  # both set by start
        self._cancel_producer: Producer | None = None

    async def start(self) -> None:
        await self._bus.consume(self._reply_to, self._subscription, self._route,
                                name=f"responses {self.service}:{self.flow}",
                                receiver_queue_size=RESPONSE_PREFETCH)
        self._producer = await self._bus.producer(self._request_topic)
        self._cancel_producer = await self._bus.producer(CANCEL_TOPIC)

    async def _route(self, message: Message) -> None:
        properties = message.properties()
        pending = self._pending.get(properties.get("id", ""))
        if pending is None:
            return  # late response for a request that was cancelled or timed out
        self._heard_at = time.monotonic()
        if properties.get("accepted"):
            pending.accept()
            return
        seq = properties.get("seq")
        pending.put((message.data(), properties.get("end") == "1"),
                    int(seq) if seq is not None else None)

    async def frames(self, request: Record, request_id: str | None = None
                     ) -> AsyncGenerator[list[Frame], None]:
        """Send ``request`` and yield its response frames in order, as batches of
        whatever has already arrived, ending after the final frame.

        Leaving the loop early (a break, an exception, a cancelled task) sends a
        cancel for the request, so the service stops and closes its LLM stream.
        """
        request_id = request_id or uuid.uuid4().hex
        # Encoded before registering: a record that cannot be encoded (e.g. a lone
        # surrogate in its text) must leave nothing behind in ``_pending``.
        data, properties = encode(request), {"id": request_id, "reply-to": self._reply_to}
        producer = self._producer
        assert producer is not None, "start() first"
        pending = self._pending[request_id] = Pending()
        finished = False
        try:
            await producer.send(data, properties)
            waited = self._accept_wait()
            give_up = time.monotonic() + waited
            while not pending.accepted:  # re-sent until a replica says it has it
                try:
                    batch = await pending.batch(max(0.0, min(
                        RESEND_INTERVAL, give_up - time.monotonic())))
                except TimeoutError:
                    if time.monotonic() >= give_up:
                        raise self._no_service(waited) from None
                    # The request may have been dropped on its way (non-persistent);
                    # services ignore an id they already have.
                    await producer.send(data, properties)
                    continue
                if batch:
                    finished = batch[-1][1]
                    yield batch
            # Heard from the service now: the next record is due within ``timeout``,
            # a sign of life within LIVENESS.
            pending.alive_at = quiet_until = time.monotonic()
            quiet_until += self.timeout
            while not finished:
                now = time.monotonic()
                try:
                    batch = await pending.batch(
                        min(quiet_until, pending.alive_at + self.liveness) - now)
                except TimeoutError:
                    now = time.monotonic()
                    if now >= quiet_until:
                        raise silence(self.service, self.flow, self.timeout) from None
                    if now >= pending.alive_at + self.liveness:
                        raise self._lost() from None
                    continue
                if batch:
                    pending.alive_at = quiet_until = time.monotonic()
                    quiet_until += self.timeout
                    finished = batch[-1][1]
                    yield batch
        finally:
            del self._pending[request_id]
            pending.close()
            if not finished:
                self._cancel(request_id)

    def _lost(self) -> RequestTimeout:
        return RequestTimeout(
            f"{self.service} on flow {self.flow} went quiet: not a word for "
            f"{self.liveness:g} s, not even that it still has the request (it stopped, "
            f"or its records were lost in transit: was the broker restarted?)")

    def _accept_wait(self) -> float:
        """How long a request waits for a replica to take it: ``accept_timeout``,
        or, while the service has answered within ``RECENTLY_HEARD``,
        ``BUSY_ACCEPT_TIMEOUT`` (it is there, only slow)."""
        heard = self._heard_at
        if heard is not None and time.monotonic() - heard < RECENTLY_HEARD:
            return max(self.accept_timeout, min(self.timeout, BUSY_ACCEPT_TIMEOUT))
        return self.accept_timeout

    def _no_service(self, waited: float) -> ServiceError:
        return ServiceError(Error(
            type="no-service",
            message=f"no {self.service} processor took the request on flow {self.flow} "
                    f"within {waited:g} s: is it running (tg-start, or "
                    f"tg-run {self.service}) and is the flow started?"))

    def _cancel(self, request_id: str) -> None:
        # Not awaited: while the broker is away a send waits for its timeout, and the
        # caller's error (e.g. a timeout) must not wait for that.
        task = asyncio.get_running_loop().create_task(self._send_cancel(request_id))
        self._cancels.add(task)
        task.add_done_callback(self._cancels.discard)

    async def _send_cancel(self, request_id: str) -> None:
        try:
            assert self._cancel_producer is not None
            await self._cancel_producer.send(encode(Cancel(id=request_id)),
                                             properties={"id": request_id})
        except Exception as error:
            log.warning("id=%s cancel not sent: %s", request_id, error)
