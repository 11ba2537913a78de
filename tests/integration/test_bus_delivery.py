"""The transport's hot path on a real broker: a burst of posts that queues up in
the consumer before its loop reads arrives whole and in order (those messages are
taken without a wake-up each), and a post that fails is raised by the next one."""
import asyncio
import uuid

import pulsar
import pulsar.asyncio as pulsar_async
import pytest

from trustgraph.base.relay import Delta
from trustgraph.base.reply import ReplyProducers
from trustgraph.base.rpc import END, ID, SEQ
from trustgraph.pubsub.bus import MAX_TAKEN
from trustgraph.pubsub.pulsar_shim import MAX_RECORD_BYTES
from trustgraph.schema import TextCompletionResponse

BURST = 10 * MAX_TAKEN


async def test_a_burst_queued_before_the_loop_reads_arrives_whole_and_in_order(bus):
    topic = f"non-persistent://tg/test/burst-{uuid.uuid4().hex}"
    seen: list[int] = []
    ended = asyncio.Event()

    async def handler(message):
        if message.properties().get("end"):
            ended.set()
        else:
            seen.append(int(message.data()))

    await bus.consume(topic, "burst", handler, receiver_queue_size=4 * BURST)
    producer = await bus.producer(topic)
    for i in range(BURST):  # no await suspends here: the burst queues in the consumer
        await producer.post(str(i).encode(), {"id": "burst"})
    await producer.send(b"", {"id": "burst", "end": "1"})
    async with asyncio.timeout(30):
        await ended.wait()
    assert seen == list(range(BURST))


async def test_a_failed_post_is_raised_by_the_next_one(bus):
    producer = await bus.producer(f"non-persistent://tg/test/fail-{uuid.uuid4().hex}")
    await producer.post(b"fine", {"id": "a"})
    await producer._producer.close()  # every post from now on fails
    with pytest.raises(pulsar_async.PulsarException) as failure:
        for _ in range(1000):  # a receipt may come later, from the client's thread
            await producer.post(b"next", {"id": "a"})
            await asyncio.sleep(0.001)
    assert failure.value.error() == pulsar.Result.AlreadyClosed


async def test_a_batched_producer_sends_what_one_turn_posted_as_one_batch(bus):
    """The response topics' producers: posts made in one turn of the event loop leave
    together when it ends, each arriving whole, in order and with its own
    properties; a record larger than a batch may hold goes on its own."""
    topic = f"non-persistent://tg/test/batched-{uuid.uuid4().hex}"
    received: list[tuple[bytes, dict, int]] = []
    ended = asyncio.Event()

    async def handler(message):
        # its place in the batch it came in (0 for the first of each batch)
        received.append((message.data(), message.properties(),
                         message.message_id().batch_index()))
        if message.properties().get("end"):
            ended.set()

    await bus.consume(topic, "batched", handler)
    producer = await bus.producer(topic, batched=True)
    large = b"x" * MAX_RECORD_BYTES
    sent = [(str(i).encode(), {"seq": str(i)}) for i in range(5)]
    sent += [(large, {"seq": "5"}), (b"6", {"seq": "6"})]
    for data, properties in sent:  # nothing suspends: all in one turn
        await producer.post(data, properties)
    await producer.send(b"", {"seq": "7", "end": "1"})
    async with asyncio.timeout(30):
        await ended.wait()
    assert [(data, properties) for data, properties, _ in received] == \
        [*sent, (b"", {"seq": "7", "end": "1"})]
    # five in one batch; the large record fills one alone; the rest share the last
    assert [place for _, _, place in received] == [0, 1, 2, 3, 4, 0, 0, 1]


async def test_a_reply_goes_unbatched_or_batched_as_asked_and_in_order(bus):
    """A service answers a request through its reply topic's unbatched producer while
    it has few requests in hand (``reply.BATCHED_FROM``), else through the batched one;
    either way the request's records arrive in order, the last marked."""
    topic = f"non-persistent://tg/test/replies-{uuid.uuid4().hex}"
    places: dict[str, list[tuple[str, int]]] = {"lone": [], "busy": []}
    ended = asyncio.Event()

    async def handler(message):
        properties = message.properties()
        places[properties[ID]].append((properties[SEQ], message.message_id().batch_index()))
        if properties[ID] == "busy" and properties.get(END):
            ended.set()

    await bus.consume(topic, "replies", handler)
    replies = ReplyProducers(bus)
    for request_id, batched in (("lone", False), ("busy", True)):
        reply = await replies.reply(topic, TextCompletionResponse, request_id, batched)
        await reply.send(Delta("a"), False)
        await reply.send(Delta("b"), False)
        await reply.send(TextCompletionResponse(end_of_stream=True), True)
    async with asyncio.timeout(30):
        await ended.wait()
    assert places["lone"] == [("0", -1), ("1", -1), ("2", -1)]  # -1: not in a batch
    assert places["busy"] == [("0", 0), ("1", 1), ("2", 2)]
