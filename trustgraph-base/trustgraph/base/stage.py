"""Pipeline stages: durable work on persistent topics.

A stage consumes ``persistent://tg/flow/<stage>:<flow>`` on a Shared subscription,
runs its handler, and acknowledges only after the handler returned, i.e. after its
effects (store writes, records emitted to the next stages) are durable. A crash
before that leaves the message unacknowledged, so the broker redelivers it: nothing
is lost, and handlers are written to be idempotent so nothing is duplicated.
"""
import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ..pubsub import Bus, Message
from ..schema import Record, decode, encode, flow_topic

log = logging.getLogger(__name__)

# pulsar-lite refuses messages of 5 MiB or more (metadata included) and its chunking
# is broken, so stages split large work before it reaches the broker.
MAX_RECORD_BYTES = 4 * 1024 * 1024


class Rejected(Exception):
    """The input can never be processed (malformed, unsupported): acknowledge and
    log it instead of redelivering it forever."""


@dataclass
class StageContext:
    flow: str
    clients: Any  # the processor's ``Clients`` for this flow
    emit: Callable[[str, Record], Awaitable[None]]  # (stage, record) → durable send


StageHandler = Callable[[Any, StageContext], Awaitable[None]]


@dataclass(frozen=True)
class Stage:
    name: str  # the topic it consumes: flow_topic(name, flow)
    record: type[Record]
    handler: StageHandler
    subscription: str = ""  # defaults to the stage name


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
        await producer.send(data)  # returns once the broker has stored it


class StageRunner:
    def __init__(self, bus: Bus, stage: Stage, flow: str, clients: Any,
                 limit: asyncio.Semaphore) -> None:
        self.stage = stage
        self.flow = flow
        self._bus = bus
        self._limit = limit
        self._context = StageContext(flow, clients, Emitters(bus, flow).emit)
        self._consumer = None
        self.tasks: set[asyncio.Task] = set()

    async def start(self) -> None:
        self._consumer = await self._bus.subscribe(
            flow_topic(self.stage.name, self.flow), self.stage.subscription or self.stage.name)
        self._bus.receive(self._consumer, self._accept, f"stage {self.stage.name}:{self.flow}")

    async def _accept(self, message: Message) -> None:
        await self._limit.acquire()
        task = asyncio.create_task(self._work(message))
        self.tasks.add(task)
        task.add_done_callback(lambda t: (self._limit.release(), self.tasks.discard(t)))

    async def _work(self, message: Message) -> None:
        name = self.stage.name
        try:
            record = decode(self.stage.record, message.data())
            await self.stage.handler(record, self._context)
        except (Rejected, ValidationError) as error:
            log.warning("%s: rejected message %s: %s", name, message.message_id(), error)
        except asyncio.CancelledError:
            return  # shutting down: unacknowledged, so it is redelivered
        except Exception:
            log.exception("%s: failed; the message will be redelivered", name)
            await self._consumer.negative_acknowledge(message)
            return
        await self._consumer.acknowledge(message)
