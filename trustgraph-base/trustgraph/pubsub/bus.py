"""The Pulsar transport: one client per process, producers, consumers, receive loops.

Both the embedded broker (pulsar-lite) and Apache Pulsar are reached through the
official ``pulsar-client``; nothing here knows which one it is talking to except the
consumer-id workaround below.
"""
import asyncio
import gc
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterator

import _pulsar
import pulsar
import pulsar.asyncio as pulsar_async

log = logging.getLogger(__name__)

DEFAULT_PULSAR_URL = "pulsar://127.0.0.1:6650"
Message = pulsar.Message
Handler = Callable[[Message], Awaitable[None]]

_subscription_names = itertools.count()


class Bus:
    """A connected Pulsar client that hands out producers and consumer loops."""

    def __init__(self, url: str, consumer_id_offset: int = 0) -> None:
        self.url = url
        self._client = pulsar_async.Client(
            url,
            # The native logger, not a Python one: with a Python logger the C++ client
            # calls into Python for every log statement it considers, which doubled
            # the CPU cost of each message (~110 µs against ~50 µs received).
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn),
            operation_timeout_seconds=10,
        )
        self._consumer_id_offset = consumer_id_offset
        self._loops: list[asyncio.Task] = []
        self._consumers: list[pulsar_async.Consumer] = []
        self._producers: list[pulsar_async.Producer] = []  # the underlying ones

    async def producer(self, topic: str, batching: bool = False) -> "Producer":
        """A producer; batching stays off unless asked for, since each batched send
        waits for the batch window (~10 ms) and bursts on non-persistent topics drop."""
        producer = await self._client.create_producer(
            topic,
            batching_enabled=batching,
            block_if_queue_full=True,
            send_timeout_millis=10_000,
        )
        self._producers.append(producer)
        return Producer(producer)

    async def consume(self, topic: str, subscription: str, handler: Handler,
                      name: str = "", receiver_queue_size: int = 1000) -> None:
        """Subscribe (Shared) and run one long-lived receive loop calling ``handler``."""
        self.receive(await self.subscribe(topic, subscription, receiver_queue_size),
                     handler, name)

    async def subscribe(self, topic: str, subscription: str,
                        receiver_queue_size: int = 1000) -> pulsar_async.Consumer:
        """A Shared subscription (replicas compete; Exclusive/Failover delivered
        duplicates on pulsar-lite). Unacknowledged messages of a persistent topic are
        redelivered after ``negative_acknowledge`` or a crash."""
        await self._skip_consumer_ids()
        consumer = await self._client.subscribe(
            topic,
            subscription,
            consumer_type=pulsar.ConsumerType.Shared,
            initial_position=pulsar.InitialPosition.Earliest,
            receiver_queue_size=receiver_queue_size,
            negative_ack_redelivery_delay_ms=2_000,
        )
        self._consumers.append(consumer)
        return consumer

    def receive(self, consumer: pulsar_async.Consumer, handler: Handler, name: str = "") -> None:
        """Run one long-lived receive loop calling ``handler`` for each message.

        A pending ``receive()`` is never cancelled (that loses the next message); the
        loop ends when the consumer is closed.
        """
        self._loops.append(asyncio.create_task(
            _receive_loop(consumer, handler), name=name or f"receive {consumer.topic()}"))

    async def _skip_consumer_ids(self) -> None:
        # pulsar-lite keys Shared consumers by the client's per-connection consumer
        # id, so a replica whose first consumer also has id 0 is refused ("Consumer 0
        # already exists"). Each replica burns a distinct number of ids first; real
        # Pulsar needs none of this (offset 0).
        while self._consumer_id_offset > 0:
            self._consumer_id_offset -= 1
            burner = await self._client.subscribe(
                f"non-persistent://tg/control/id-skip-{next(_subscription_names)}",
                "id-skip", consumer_type=pulsar.ConsumerType.Shared)
            await burner.close()

    async def close(self) -> None:
        if self._client is None:
            return  # closed already
        for consumer in self._consumers:
            await _quietly(consumer.close())
        for task in self._loops:
            task.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        for producer in self._producers:
            await _quietly(producer.close())
        await _quietly(self._client.close())
        # pulsar-client aborts the process ("terminate called without an active
        # exception") when its C++ objects are destroyed during interpreter shutdown;
        # destroy them now, while Python is whole.
        self._consumers.clear()
        self._producers.clear()
        self._client = None
        gc.collect()


class Producer:
    """``send`` waits for the broker's receipt; ``post`` does not, for the many
    records of a stream whose order the producer keeps anyway.

    Awaiting every receipt costs an idle/wake cycle of the event loop per message
    (~100 µs of CPU, against ~45 µs posted), which decides how many streams two
    cores can carry. A failed post is raised by the next ``send`` or ``post``; past
    ``MAX_UNCONFIRMED`` posts without receipts, ``post`` waits like ``send``.
    """

    MAX_UNCONFIRMED = 256

    def __init__(self, producer: pulsar_async.Producer) -> None:
        self._producer = producer
        self._posted = 0  # written by the event loop only
        self._confirmed = 0  # written by the client's callback thread only
        self._failure: Exception | None = None

    async def send(self, data: bytes, properties: dict[str, str] | None = None) -> None:
        self._raise_failure()
        await self._producer.send(data, properties=properties)

    async def post(self, data: bytes, properties: dict[str, str]) -> None:
        self._raise_failure()
        if self._posted - self._confirmed >= self.MAX_UNCONFIRMED:
            await self.send(data, properties)  # ordered: every earlier post is confirmed too
            return
        builder = _pulsar.MessageBuilder()
        builder.content(data)
        for key, value in properties.items():
            builder.property(key, value)
        self._posted += 1
        # pulsar.asyncio has no unawaited send; this is its own call without the future.
        self._producer._producer.send_async(builder.build(), self._receipt)

    def _receipt(self, result: pulsar.Result, message_id: object) -> None:
        self._confirmed += 1
        if result != pulsar.Result.Ok and self._failure is None:
            self._failure = pulsar_async.PulsarException(result)

    def _raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure

    async def close(self) -> None:
        await self._producer.close()


# Messages taken from a consumer's queue at one wake-up before the loop lets other
# tasks run (and the requests whose responses these are read them).
MAX_TAKEN = 64


async def _receive_loop(consumer: pulsar_async.Consumer, handler: Handler) -> None:
    while True:
        try:
            message = await consumer.receive()
        except pulsar_async.PulsarException as error:
            if error.error() == pulsar.Result.AlreadyClosed:
                return
            # The client reconnects by itself; wait a little and receive again.
            log.warning("receive on %s failed: %s", consumer.topic(), error)
            await asyncio.sleep(0.5)
            continue
        await _handle(consumer, handler, message)
        # Each awaited receive costs a wake-up of the event loop from the client's
        # thread (~30-50 µs of CPU); what is already in the queue is taken without.
        for message in _waiting(consumer):
            await _handle(consumer, handler, message)


def _waiting(consumer: pulsar_async.Consumer) -> Iterator[Message]:
    """The messages already in ``consumer``'s queue (up to ``MAX_TAKEN``), taken
    without waiting: a receive with no time to wait fails at once when it is empty."""
    for _ in range(MAX_TAKEN):
        try:
            received = consumer._consumer.receive(0)
        except pulsar.Timeout:
            return
        except pulsar.PulsarException:
            return  # closed, or not connected: the awaited receive reports it
        message = pulsar.Message()
        message._message, message._schema = received, consumer._schema
        yield message


async def _handle(consumer: pulsar_async.Consumer, handler: Handler, message: Message) -> None:
    try:
        await handler(message)
    except Exception:
        log.exception("handler for %s failed", consumer.topic())


async def _quietly(closing: Awaitable) -> None:
    try:
        await closing
    except Exception as error:  # closing during shutdown: nothing left to save
        log.debug("close: %s", error)
