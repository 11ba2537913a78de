"""Pipeline stages: durable work on persistent topics.

A stage consumes ``persistent://tg/flow/<stage>:<flow>`` on a Shared subscription,
runs its handler, and acknowledges only after the handler returned, i.e. after its
effects (store writes, records emitted to the next stages) are durable. A crash
before that leaves the message unacknowledged, so the broker redelivers it: nothing
is lost, and handlers are written to be idempotent so nothing is duplicated.

A record that keeps failing is not redelivered for ever: once it has been delivered
``TG_MAX_DELIVERIES`` times (failures and crashes of the process handling it alike,
as the broker counts them), it goes to the dead-letter topic of its stage and
subscription, ``persistent://tg/flow/<stage>-<subscription>-dlq:<flow>``, as it was
(so it can be sent back once the cause is fixed), with properties saying where it
came from, how often it was tried and the last error; then it is acknowledged.

A stage takes only as much as the services below it can absorb: at most
``TG_STAGE_IN_FLIGHT`` records of one stage on one flow are handled at once, within
the processor's bulk share of its slots (``lanes.Slots``); until one is done the
stage's receive loop takes no more, and the broker holds the rest (a consumer is
given ``STAGE_PREFETCH`` records ahead). Its handlers run in the bulk lane, so every
request they make waits behind interactive work, and says it is ``queued`` rather
than time out while it does.
"""
import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ValidationError

from .. import tracing
from ..pubsub import Bus, Message
from ..pubsub.bus import Consumer, Producer
from ..pubsub.pulsar_shim import MAX_RECORD_BYTES
from ..schema import Record, decode, encode, flow_topic
from .clients import Clients
from .flows import Parameters
from .lanes import BULK, Slots, set_lane

log = logging.getLogger(__name__)

# A record must fit one broker message (``MAX_RECORD_BYTES``: the broker's chunking is
# not relied on), so stages split large work before it reaches the broker.
__all__ = ["MAX_RECORD_BYTES"]  # sized by, among others, the stores' answers
# Records a stage consumer lets the broker push ahead of its handlers. Its handlers
# take each record as soon as a concurrency slot is free, so a few are enough; a
# small prefetch also spreads a backlog evenly over replicas. And it keeps pulsar-lite
# 0.2.0 sane: when a consumer with a large prefetch is SIGKILLed, the broker often
# keeps the dead consumer registered, holding its unacknowledged records and refusing
# its restarted successor ("Consumer N already exists") until the broker restarts
# (measured: prefetch 100 wedged 7 kills in 7, 1000 in 3 of 4, 10 or less none in 18).
STAGE_PREFETCH = 10
DEFAULT_MAX_DELIVERIES = 10
DEFAULT_IN_FLIGHT = 16  # records of one stage on one flow handled at once
DEAD_LETTER_SUBSCRIPTION = "dead-letter"  # made with the topic, so records are kept


_delivery: ContextVar[int] = ContextVar("tg_delivery", default=1)


def delivery() -> int:
    """How many times the record this task handles has been delivered (1: the
    first time). A handler may skip what an earlier delivery finished."""
    return _delivery.get()


class Rejected(Exception):
    """The input can never be processed (malformed, unsupported): acknowledge and
    log it instead of redelivering it forever."""


Rec = TypeVar("Rec", bound=Record)


@dataclass
class StageContext:
    """What a stage handler knows besides its record: the flow and its parameters,
    the services it may call on it, and the durable send to the next stages."""

    flow: str
    clients: Clients  # ``ctx.clients.get("prompt")``
    emit: Callable[[str, Record], Awaitable[None]]  # (stage, record) → durable send
    # ``ctx.parameters.of(Model)`` (base/flows.py); replaced as the flow changes
    parameters: Parameters = field(default_factory=lambda: Parameters(""))


StageHandler = Callable[[Rec, StageContext], Awaitable[None]]


class Stage:
    """A pipeline stage: the topic it consumes (``flow_topic(name, flow)``), its record
    type and its handler, checked against each other where the stage is made (a
    generic constructor, as ``Service``'s)."""

    __slots__ = ("name", "record", "handler", "subscription")

    def __init__(self, name: str, record: type[Rec], handler: StageHandler[Rec],
                 subscription: str = "") -> None:
        self.name = name
        self.record: type[Record] = record
        self.handler: StageHandler[Any] = handler
        self.subscription = subscription  # defaults to the stage name


class Emitters:
    """Producers for persistent stage topics, created on first use and kept."""

    def __init__(self, bus: Bus, flow: str) -> None:
        self._bus = bus
        self._flow = flow
        self._producers: dict[str, asyncio.Future] = {}

    async def emit(self, stage: str, record: Record) -> None:
        data = encode(record)
        if len(data) > MAX_RECORD_BYTES:
            raise Rejected(f"a {type(record).__name__} of {len(data)} bytes is over the "
                           f"{MAX_RECORD_BYTES} byte limit for one message")
        if stage not in self._producers:
            self._producers[stage] = asyncio.ensure_future(
                self._bus.producer(flow_topic(stage, self._flow)))
        producer = await asyncio.shield(self._producers[stage])
        # The trace goes on with the record: the next stage's span is this one's child.
        await producer.send(data, tracing.inject({}) or None)  # returns once stored


def dead_letter_topic(stage: str, subscription: str, flow: str) -> str:
    return flow_topic(f"{stage}-{subscription}-dlq", flow)


class DeadLetters:
    """Where a stage's records go when they have failed too often."""

    def __init__(self, bus: Bus, stage: str, subscription: str, flow: str) -> None:
        self._bus = bus
        self._topic = dead_letter_topic(stage, subscription, flow)
        self._where = {"stage": stage, "subscription": subscription, "flow": flow}
        self._producer: asyncio.Future | None = None

    async def _ready(self) -> Producer:
        # The subscription first: a topic nobody subscribes to keeps nothing (Pulsar).
        consumer = await self._bus.subscribe(self._topic, DEAD_LETTER_SUBSCRIPTION)
        await consumer.close()
        return await self._bus.producer(self._topic)

    async def send(self, message: Message, deliveries: int, error: str) -> None:
        failed = self._producer is not None and self._producer.done() and (
            self._producer.cancelled() or self._producer.exception() is not None)
        if self._producer is None or failed:  # made on first use; again after a failure
            self._producer = asyncio.ensure_future(self._ready())
        producer = await asyncio.shield(self._producer)
        await producer.send(message.data(), {
            **self._where, "deliveries": str(deliveries), "error": error[:2000],
            "message-id": str(message.message_id())})


class StageRunner:
    def __init__(self, bus: Bus, stage: Stage, context: StageContext, limit: Slots,
                 max_deliveries: int = DEFAULT_MAX_DELIVERIES,
                 in_flight: int = DEFAULT_IN_FLIGHT, processor: str = "") -> None:
        """``limit``: the processor's slots (this stage takes bulk's share of them);
        ``in_flight``: records of this stage on this flow handled at once;
        ``processor``: whose stage it is (its spans' service name)."""
        self.stage = stage
        self.flow = context.flow
        self._bus = bus
        self._limit = limit
        self._in_flight = asyncio.Semaphore(max(1, in_flight))
        self._max_deliveries = max(1, max_deliveries)
        self._context = context  # the runtime's clients and emitters of the flow
        self._dead = DeadLetters(bus, stage.name, stage.subscription or stage.name,
                                 context.flow)
        self._consumer: Consumer | None = None  # set by start, before any message
        self._stopping: asyncio.Event | None = None  # set by stop: released when closed
        self.tasks: set[asyncio.Task] = set()
        self._tracer = tracing.tracer(processor or stage.name)  # None: not traced

    @property
    def context(self) -> StageContext:
        return self._context

    async def start(self) -> None:
        self._consumer = await self._bus.subscribe(
            flow_topic(self.stage.name, self.flow), self.stage.subscription or self.stage.name,
            receiver_queue_size=STAGE_PREFETCH, replicated=True)
        self._bus.receive(self._consumer, self._accept, f"stage {self.stage.name}:{self.flow}")

    async def stop(self) -> None:
        """Stop taking records (the flow stopped): the records being handled are
        finished and acknowledged, then the consumer is closed. What it received and
        did not start goes back unacknowledged: the subscription keeps it, with the
        rest of the backlog, for when the flow starts again."""
        if self._stopping is not None or self._consumer is None:
            return
        self._stopping = asyncio.Event()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        await self._bus.release(self._consumer)
        self._stopping.set()  # the receive loop, held in _accept, finds it closed

    async def _accept(self, message: Message) -> None:
        """Waits (holding up the receive loop, so the broker keeps the rest) until
        this stage may take another record."""
        if self._stopping is not None:
            # Held until the consumer is closed: the receive loop takes no more
            # records meanwhile, and this one is redelivered (never acknowledged).
            await self._stopping.wait()
            return
        await self._in_flight.acquire()
        try:
            await self._limit.acquire(BULK)
        except BaseException:
            self._in_flight.release()
            raise
        task = asyncio.create_task(self._work(message))
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task) -> None:
        self._limit.release(BULK)
        self._in_flight.release()
        self.tasks.discard(task)

    async def _work(self, message: Message) -> None:
        name, consumer = self.stage.name, self._consumer
        assert consumer is not None
        deliveries = message.redelivery_count() + 1
        set_lane(BULK)  # this task's own context: every request it makes is bulk
        _delivery.set(deliveries)
        if deliveries > self._max_deliveries:
            # Tried that often already and never settled: its handling may be what
            # kills the process, so it is not handled again.
            await self._give_up(message, deliveries, "not settled after "
                                f"{deliveries - 1} deliveries (did handling it end the "
                                "process?)")
            return
        if deliveries > 1:  # rare, and what an operator looks for after a crash
            log.info("%s: message %s delivered again (delivery %d): the process that had "
                     "it failed or stopped before settling it", name, message.message_id(),
                     deliveries)
        scope = self._scope(message, deliveries)
        try:
            record = decode(self.stage.record, message.data())
            if scope is not None:
                tracing.describe(scope.span, record)
            await self.stage.handler(record, self._context)
        except (Rejected, ValidationError) as error:
            log.warning("%s: rejected message %s: %s", name, message.message_id(), error)
            if scope is not None:
                scope.failed("rejected", str(error))
        except asyncio.CancelledError:
            return  # shutting down: unacknowledged, so it is redelivered
        except Exception as error:
            if scope is not None:
                scope.failed(type(error).__name__, str(error))
            if deliveries >= self._max_deliveries:
                await self._give_up(message, deliveries, f"{type(error).__name__}: {error}")
                return
            log.exception("%s: failed (delivery %d of at most %d); the message will be "
                          "redelivered", name, deliveries, self._max_deliveries)
            await consumer.negative_acknowledge(message)
            return
        finally:
            if scope is not None:
                scope.close()
        await consumer.acknowledge(message)

    def _scope(self, message: Message, deliveries: int) -> tracing.Scope | None:
        """The record's span, under the span that emitted it (the trace of its
        document), current while it is handled; None when not traced."""
        if self._tracer is None:
            return None
        return tracing.open_scope(
            self._tracer, self.stage.name, tracing.CONSUMER,
            tracing.extract(message.properties()),
            {tracing.names.STAGE: self.stage.name, tracing.names.FLOW: self.flow,
             tracing.names.DELIVERY: deliveries})

    async def _give_up(self, message: Message, deliveries: int, error: str) -> None:
        """To the dead-letter topic, then acknowledged; redelivered if that fails."""
        consumer = self._consumer
        assert consumer is not None
        try:
            await self._dead.send(message, deliveries, error)
        except Exception:
            log.exception("%s: could not dead-letter message %s; it will be redelivered",
                          self.stage.name, message.message_id())
            await consumer.negative_acknowledge(message)
            return
        await consumer.acknowledge(message)
        log.error("%s: message %s failed %d times (last: %s); sent to %s and acknowledged",
                  self.stage.name, message.message_id(), deliveries, error,
                  dead_letter_topic(self.stage.name, self.stage.subscription or
                                    self.stage.name, self.flow))
