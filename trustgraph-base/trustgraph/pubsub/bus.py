"""The Pulsar transport: one client per process, producers, consumers, receive loops.

Both the embedded broker (pulsar-lite) and Apache Pulsar are reached through the
official ``pulsar-client``; nothing here knows which one it is talking to except the
consumer-id workaround below. What this takes from pulsar-client beyond its public
API is in ``pulsar_shim``, resolved once per producer and receive loop.
"""
import asyncio
import gc
import logging
import threading
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TypeAlias

import pulsar
import pulsar.asyncio as pulsar_async

from . import pulsar_shim
from .pulsar_shim import MessageBuilder

log = logging.getLogger(__name__)

DEFAULT_PULSAR_URL = "pulsar://127.0.0.1:6650"
Message: TypeAlias = pulsar_shim.Message
Consumer: TypeAlias = pulsar_async.Consumer
Handler = Callable[[Message], Awaitable[None]]

# Replicas of one processor that join a subscription without a consumer id clash
# (pulsar-lite): at most this many (``_align_consumer_id``).
ID_STRIDE = 8


def burner_topic() -> str:
    """A throw-away topic to burn a consumer id on, no other process's: two processes
    burning the same id on one topic at once were refused just the same, and the
    broker dropped the refused one's whole connection."""
    return f"non-persistent://tg/control/id-skip-{uuid.uuid4().hex}"


class Bus:
    """A connected Pulsar client that hands out producers and consumer loops."""

    def __init__(self, url: str, replica: int = 0) -> None:
        self.url = url
        self._client = pulsar_async.Client(
            url,
            # The native logger, not a Python one: with a Python logger the C++ client
            # calls into Python for every log statement it considers, which doubled
            # the CPU cost of each message (~110 µs against ~50 µs received).
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn),
            operation_timeout_seconds=10,
        )
        self._replica = replica  # which of the replicas of its processor this process is
        self._consumer_ids = 0  # consumer ids the client has handed out (see _align)
        self._subscribing = asyncio.Lock()
        self._loops: list[asyncio.Task] = []
        self._consumers: list[pulsar_async.Consumer] = []
        self._producers: list[pulsar_async.Producer] = []  # the underlying ones

    async def producer(self, topic: str, batched: bool = False) -> "Producer":
        """A producer. ``batched``: what one turn of the event loop sends goes out as
        one batch when the turn ends (``Producer``); for the response topics, whose
        many streams' records are small and numerous. Off elsewhere: a stage's
        consumer acknowledges each message, and a batch is redelivered whole."""
        producer = await self._client.create_producer(
            topic,
            batching_enabled=batched,
            # Never reached: each turn's batch is flushed when the turn ends.
            batching_max_publish_delay_ms=1000,
            block_if_queue_full=True,
            send_timeout_millis=10_000,
        )
        self._producers.append(producer)
        return Producer(producer, batched)

    async def consume(self, topic: str, subscription: str, handler: Handler,
                      name: str = "", receiver_queue_size: int = 1000,
                      replicated: bool = False) -> pulsar_async.Consumer:
        """Subscribe (Shared) and run one long-lived receive loop calling ``handler``,
        until the consumer is closed (``release``)."""
        consumer = await self.subscribe(topic, subscription, receiver_queue_size, replicated)
        self.receive(consumer, handler, name)
        return consumer

    async def subscribe(self, topic: str, subscription: str,
                        receiver_queue_size: int = 1000,
                        replicated: bool = False) -> pulsar_async.Consumer:
        """A Shared subscription (replicas compete; Exclusive/Failover delivered
        duplicates on pulsar-lite). Unacknowledged messages of a persistent topic are
        redelivered after ``negative_acknowledge``, a crash, or ``release``.
        ``replicated``: other processes (replicas) join the same subscription."""
        async with self._subscribing:  # the ids are counted: one subscribe at a time
            if replicated:
                await self._align_consumer_id()
            self._consumer_ids += 1
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

    async def release(self, consumer: pulsar_async.Consumer) -> None:
        """Close one consumer: its receive loop ends, and what it received without
        acknowledging goes back to the subscription (which stays, with its backlog)."""
        if consumer in self._consumers:
            self._consumers.remove(consumer)
        await _quietly(consumer.close())
        self._loops = [loop for loop in self._loops if not loop.done()]

    def receive(self, consumer: pulsar_async.Consumer, handler: Handler, name: str = "") -> None:
        """Run one long-lived receive loop calling ``handler`` for each message.

        A pending ``receive()`` is never cancelled (that loses the next message); the
        loop ends when the consumer is closed.
        """
        self._loops.append(asyncio.create_task(
            _receive_loop(consumer, handler), name=name or f"receive {consumer.topic()}"))

    async def _align_consumer_id(self) -> None:
        # pulsar-lite keys a Shared subscription's consumers by the client's consumer
        # id, so a second process joining it with an id already there is refused
        # ("Consumer 0 already exists", seen by the client as a 10 s timeout). The
        # client hands out ids 0, 1, 2, ... per connection; replicas subscribe as
        # flows start and stop, and call services on first use, so their counts
        # drift apart. A replicated subscription is therefore made only with an id
        # equal to the replica's index modulo ID_STRIDE, ids burnt on a throw-away
        # topic until it is: replicas (fewer than ID_STRIDE) never share one. Real
        # Pulsar needs none of this.
        while self._consumer_ids % ID_STRIDE != self._replica % ID_STRIDE:
            self._consumer_ids += 1
            burner = await self._client.subscribe(
                burner_topic(),
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

    The client's thread hands each receipt to a callback, and must take the GIL to
    do so, builtin or not: it waits for the event loop's thread to let go, and the
    loop then waits for it. So most posts ask for no receipt at all (``None``: the
    client then calls nothing): a message sent and received in one process cost
    ~30 µs of CPU without receipts against ~48 µs with a builtin one. Only every
    ``COUNTED_EVERY``-th post asks for its receipt, which counts what is confirmed
    (receipts come in order, so that one confirms every post before it) and records
    a failure: a producer that fails, fails every post after it, so the failure is
    still raised within ``COUNTED_EVERY`` posts (or by the stream's final ``send``).

    A batched producer (``Bus.producer``) sends what one turn of the event loop
    posted as one broker message, flushed as the turn ends: with 128 streams, the
    deltas that arrived together from their LLMs (one epoll wait's worth) leave
    together, and nothing waits for a batch window. That halved the broker's CPU per
    streamed token (16 → 7 µs); the receiving client splits a batch into its messages.
    """

    MAX_UNCONFIRMED = 256
    COUNTED_EVERY = 32

    def __init__(self, producer: pulsar_async.Producer, batched: bool = False) -> None:
        self._producer = producer
        self._send = pulsar_shim.sender(producer)
        self._flush = pulsar_shim.flusher(producer) if batched else None
        self._flush_due = False  # a flush is scheduled for the end of this turn
        self._posted = 0  # written by the event loop only
        self._confirmed = 0  # posts known to be confirmed
        # any key but Ok: failed
        self._results: dict[pulsar.Result, object] = {pulsar.Result.Ok: None}

    async def send(self, data: bytes, properties: dict[str, str] | None = None) -> None:
        self._raise_failure()
        posted = self._posted
        sending = self._producer.send(data, properties=properties)
        self._flush_soon()  # runs after the send has joined the batch
        await sending
        self._confirmed = max(self._confirmed, posted)  # ordered: earlier posts are too

    async def post(self, data: bytes, properties: dict[str, str]) -> None:
        self._raise_failure()
        if self._posted - self._confirmed >= self.MAX_UNCONFIRMED:
            await self.send(data, properties)
            return
        self._posted += 1
        receipt = None if self._posted % self.COUNTED_EVERY else \
            partial(self._counted, self._posted)
        self._send(MessageBuilder().content(data).properties(properties).build(), receipt)
        self._flush_soon()

    def _flush_soon(self) -> None:
        if self._flush is not None and not self._flush_due:
            self._flush_due = True
            asyncio.get_running_loop().call_soon(self._flush_now)

    def _flush_now(self) -> None:
        self._flush_due = False
        assert self._flush is not None
        self._flush(_flushed)  # a failed send is reported by its own receipt

    def _counted(self, posted: int, result: pulsar.Result, message_id: object) -> None:
        self._confirmed = max(self._confirmed, posted)
        self._results.setdefault(result, message_id)

    def _raise_failure(self) -> None:
        if len(self._results) > 1:
            failed = next(result for result in list(self._results)
                          if result != pulsar.Result.Ok)
            del self._results[failed]
            raise pulsar_async.PulsarException(failed)

    async def close(self) -> None:
        await self._producer.close()


# Messages taken one after another from a consumer's queue before the loop lets
# other tasks run (among them the requests that read what these messages carry).
MAX_TAKEN = 64


async def _receive_loop(consumer: pulsar_async.Consumer, handler: Handler) -> None:
    receive = pulsar_shim.receiver(consumer)
    taken = 0
    while True:
        try:
            received = _received(receive)
            if received.done():
                taken += 1
                if taken >= MAX_TAKEN:
                    taken = 0
                    await asyncio.sleep(0)
            else:
                taken = 0
            message = await received
        except pulsar_async.PulsarException as error:
            if error.error() == pulsar.Result.AlreadyClosed:
                return
            # The client reconnects by itself; wait a little and receive again.
            log.warning("receive on %s failed: %s", consumer.topic(), error)
            await asyncio.sleep(0.5)
            continue
        await _handle(consumer, handler, message)


def _flushed(result: pulsar.Result) -> None:
    pass


def _received(receive: pulsar_shim.Receive) -> asyncio.Future:
    """The consumer's next message, as ``pulsar.asyncio``'s ``receive`` gives it but
    cheaper when one is already queued: the client then answers inside the call, on
    this thread, and the future is settled at once. ``receive`` always settles it
    through ``call_soon_threadsafe``, which wakes the event loop through its
    self-pipe for every message (~30-50 µs of CPU each, most of what a streamed
    token cost the gateway); only a message that has yet to arrive needs that."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    here = threading.get_ident()

    def settle(result: pulsar.Result, received: object) -> None:
        if threading.get_ident() == here:
            _settle(future, result, received)
        else:
            loop.call_soon_threadsafe(_settle, future, result, received)

    receive(settle)
    return future


def _settle(future: asyncio.Future, result: pulsar.Result, received: object) -> None:
    if future.done():
        return
    if result != pulsar.Result.Ok:
        future.set_exception(pulsar_async.PulsarException(result))
        return
    future.set_result(received)


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
