"""The transport's hot path on a real broker: a burst of posts that queues up in
the consumer before its loop reads arrives whole and in order (those messages are
taken without a wake-up each), and a post that fails is raised by the next one."""
import asyncio
import uuid

import pulsar
import pulsar.asyncio as pulsar_async
import pytest

from trustgraph.pubsub.bus import MAX_TAKEN

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
