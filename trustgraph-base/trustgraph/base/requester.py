"""The requesting side of a request/response service.

One ``Requester`` per (service, flow) per process. It owns a response topic of its
own (so responses reach only the process that asked), one receive loop that hands
each response to its request's ``Call`` (``rpc``: the protocol) by the message
property ``id``, and the cancel that goes out when a caller stops listening before
the final record.
"""
import asyncio
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from typing import Protocol, TypeVar

from .. import tracing
from ..pubsub import Bus, Message
from ..pubsub.bus import Producer
from ..schema import (
    CANCEL_TOPIC,
    Cancel,
    Record,
    Response,
    encode,
    request_topic,
    response_topic,
)
from .lanes import BULK, LANE, current_lane
from .relay import BusFrame, Frame, as_record
from .rpc import (
    ACCEPTED,
    END,
    ID,
    PROBE,
    QUEUED,
    REPLY_TO,
    SEQ,
    TIMING,
    YES,
    Call,
    ServiceError,
    Timing,
)

log = logging.getLogger(__name__)

# The broker drops a non-persistent message for a consumer with no receive permits
# left, so a response consumer gets a deep prefetch queue: a burst of deltas while
# this process is busy waits in the client instead of being lost.
RESPONSE_PREFETCH = 50_000

R = TypeVar("R", bound=Response)


class ServiceClient(Protocol):
    """One service on one flow, as a caller sees it (what ``Clients.get`` gives): the
    bus ``Requester`` and the in-process ``LocalRequester`` alike."""

    service: str
    flow: str

    def frames(self, request: Record, request_id: str | None = None
               ) -> AsyncGenerator[Sequence[Frame], None]: ...

    def stream(self, request: Record, model: type[R],
               request_id: str | None = None) -> AsyncIterator[R]: ...

    async def call(self, request: Record, model: type[R]) -> R: ...


class Calls:
    """``stream`` and ``call``, built on a ``frames`` method: shared by the bus
    ``Requester`` and the in-process ``LocalRequester``, so callers see one interface
    (``ServiceClient``) and one way of decoding records and raising their errors."""

    service: str
    flow: str
    timing: Timing

    def frames(self, request: Record, request_id: str | None = None
               ) -> AsyncGenerator[Sequence[Frame], None]:
        """Batches of the response's frames, whatever has arrived, ending after the
        final one; leaving early cancels the request."""
        raise NotImplementedError

    async def stream(self, request: Record, model: type[R],
                     request_id: str | None = None) -> AsyncIterator[R]:
        """Yield the response records; a record carrying ``error`` raises
        ``ServiceError`` (nothing can follow it)."""
        async with aclosing(self.frames(request, request_id)) as batches:
            async for batch in batches:
                for payload, _ in batch:
                    record = as_record(model, payload)
                    if record.error is not None:
                        raise ServiceError(record.error)
                    yield record

    async def call(self, request: Record, model: type[R]) -> R:
        """One request, its final record (non-streaming use)."""
        last = None
        async for last in self.stream(request, model):  # noqa: B007 (only the last is kept)
            pass
        if last is None:
            raise RuntimeError(f"{self.service} answered nothing")  # frames end with one
        return last


class Requester(Calls):
    def __init__(self, bus: Bus, service: str, flow: str, requester_id: str,
                 timing: Timing = TIMING) -> None:
        self.service = service
        self.flow = flow
        self.timing = timing
        self._bus = bus
        self._request_topic = request_topic(service, flow)
        self._reply_to = response_topic(service, flow, requester_id)
        self._subscription = requester_id
        self._calls: dict[str, Call] = {}
        self._heard_at: float | None = None  # when a replica last answered anything
        self._cancels: set[asyncio.Task] = set()
        self._producer: Producer | None = None  # once started
        self._cancel_producer: Producer | None = None

    async def start(self) -> None:
        await self._bus.consume(self._reply_to, self._subscription, self._route,
                                name=f"responses {self.service}:{self.flow}",
                                receiver_queue_size=RESPONSE_PREFETCH)
        self._producer = await self._bus.producer(self._request_topic)
        self._cancel_producer = await self._bus.producer(CANCEL_TOPIC)

    def in_flight(self) -> int:
        """Requests sent and not yet ended."""
        return len(self._calls)

    async def _route(self, message: Message) -> None:
        self._heard_at = time.monotonic()
        properties = message.properties()
        call = self._calls.get(properties.get(ID, ""))
        if call is None:
            # A request that was cancelled or timed out; or one answered twice, when
            # its answer was asked after and then arrived all the same.
            log.debug("%s: a record for id=%s, which is no longer waited for",
                      self.service, properties.get(ID))
            return
        if properties.get(ACCEPTED):
            call.accept(properties.get(QUEUED) == YES)
            return
        seq = properties.get(SEQ)
        call.put((message.data(), properties.get(END) == YES),
                 int(seq) if seq is not None else None)

    async def frames(self, request: Record, request_id: str | None = None
                     ) -> AsyncGenerator[list[BusFrame], None]:
        """Send ``request`` and yield its response frames in order, as batches of
        whatever has already arrived, ending after the final frame. Leaving the loop
        early (a break, an exception, a cancelled task) sends a cancel for the
        request, so the service stops and closes its LLM stream. The request goes in
        the lane of the work asking it (``lanes``)."""
        request_id = request_id or uuid.uuid4().hex
        # Encoded before registering: a record that cannot be encoded (e.g. a lone
        # surrogate in its text) must leave nothing behind in ``_calls``.
        data, properties = encode(request), {ID: request_id, REPLY_TO: self._reply_to}
        if current_lane() == BULK:
            properties[LANE] = BULK
        assert self._producer is not None, "Requester.start() first"
        producer = self._producer
        # The caller's span of this request; its context goes with the request.
        span = tracing.start_client(self.service, self.flow, request_id)
        if span is not None:
            tracing.inject(properties, span)
        call = self._calls[request_id] = Call(self.timing, self.service, self.flow,
                                              self._accept_wait())
        failure: BaseException | None = None
        try:
            await producer.send(data, properties)
            while not call.finished:
                batch = await call.next()
                if batch is None:  # nothing heard lately: the request or its answer lost?
                    await producer.send(*_asking_again(call, data, properties))
                else:
                    yield batch
        except Exception as error:
            failure = error
            raise
        finally:
            del self._calls[request_id]
            call.close()
            if not call.finished:
                self._cancel(request_id)
            tracing.end(span, failure, cancelled=failure is None and not call.finished)

    def _accept_wait(self) -> float:
        """How long a request waits for a replica to take it: ``accept_timeout``, or,
        while the service has answered within ``recently_heard``,
        ``busy_accept_timeout`` (it is there, only slow: ``Timing``)."""
        timing, heard = self.timing, self._heard_at
        if heard is not None and time.monotonic() - heard < timing.recently_heard:
            return max(timing.accept_timeout, min(timing.timeout, timing.busy_accept_timeout))
        return timing.accept_timeout

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
                                             properties={ID: request_id})
        except Exception as error:
            log.warning("id=%s cancel not sent: %s", request_id, error)


def _asking_again(call: Call, data: bytes, properties: dict[str, str]
                  ) -> tuple[bytes, dict[str, str]]:
    """The request again while no replica has accepted it (it may have been dropped
    on its way); once one has, a probe: its id and the records it has, no payload,
    so that a replica that never had it cannot serve it a second time."""
    if not call.accepted:
        return data, properties
    return b"", {ID: properties[ID], REPLY_TO: properties[REPLY_TO], PROBE: YES,
                 SEQ: str(call.received)}
