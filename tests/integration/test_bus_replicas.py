"""Replicas join the same Shared subscriptions however many subscriptions each made
before (pulsar-lite refuses a second consumer of a subscription with a consumer id
already in it: ``Bus`` makes a replicated subscription only with an id its replica
index owns), and share its messages."""
import ast
import asyncio
import subprocess
import sys
import uuid

from tests.support.waiting import eventually
from trustgraph.pubsub import Bus


async def test_replicas_whose_consumer_ids_would_clash_still_join_and_share(broker):
    replicas = [Bus(broker.url, replica=i) for i in range(3)]
    try:
        for bus in replicas:  # as many as each other: their next ids are the same
            for _ in range(2):
                await bus.subscribe(f"non-persistent://tg/test/own-{uuid.uuid4().hex}", "own")
        topic = f"persistent://tg/flow/shared-{uuid.uuid4().hex[:8]}:t"
        got: list[tuple[int, bytes]] = []
        for index, bus in enumerate(replicas):
            consumer = await asyncio.wait_for(
                bus.subscribe(topic, "work", receiver_queue_size=1, replicated=True), 5)

            async def handle(message, index=index, consumer=consumer):
                got.append((index, message.data()))
                await consumer.acknowledge(message)

            bus.receive(consumer, handle)
        producer = await replicas[0].producer(topic)
        for n in range(30):
            await producer.send(str(n).encode())
        await eventually(lambda: len(got) >= 30, "every message handled")
        assert sorted(int(data) for _, data in got) == list(range(30))
        assert len({index for index, _ in got}) > 1  # shared, not all on one
    finally:
        for bus in replicas:
            await bus.close()


def test_processes_burn_consumer_ids_on_topics_of_their_own():
    # Every process counts its consumer ids from 0: on a shared throw-away topic two
    # of them burning at once would meet with one id, and the broker refuses that.
    script = "from trustgraph.pubsub.bus import burner_topic as t; print([t() for _ in range(50)])"
    named = [set(ast.literal_eval(subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout))
        for _ in range(2)]
    assert len(named[0]) == len(named[1]) == 50 and not named[0] & named[1]
