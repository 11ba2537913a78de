"""Pipeline stages on persistent topics of a real pulsar-lite broker: acknowledged
only after the handler's effect, redelivered after a failure or a crash."""
import asyncio
import uuid

from tests.support.waiting import eventually
from trustgraph.base import Processor, ProcessorSettings, ProcessorSpec, Rejected, Stage
from trustgraph.base.stage import Emitters
from trustgraph.pubsub import Bus
from trustgraph.schema import Record


class Work(Record):
    n: int


async def run_stage(broker, flow, handler):
    spec = ProcessorSpec("stage-test", ProcessorSettings, lambda s: [Stage("work", Work, handler)])
    processor = Processor(spec, ProcessorSettings(pulsar_url=broker.url, tg_flows=[flow]))
    await processor.start()
    return processor


async def send(broker, flow, *numbers):
    bus = Bus(broker.url)
    emit = Emitters(bus, flow).emit
    for n in numbers:
        await emit("work", Work(n=n))
    await bus.close()


async def test_every_record_is_handled_once(broker):
    flow, seen = uuid.uuid4().hex[:8], []

    async def handler(work, ctx):
        seen.append(work.n)

    processor = await run_stage(broker, flow, handler)
    await send(broker, flow, *range(50))
    await eventually(lambda: len(seen) == 50, "all 50 records handled")
    await processor.stop()
    assert sorted(seen) == list(range(50))


async def test_a_failure_is_redelivered_and_a_rejection_is_not(broker):
    flow, attempts = uuid.uuid4().hex[:8], {}

    async def handler(work, ctx):
        attempts[work.n] = attempts.get(work.n, 0) + 1
        if work.n == 1 and attempts[1] == 1:
            raise RuntimeError("store briefly unavailable")
        if work.n == 2:
            raise Rejected("never processable")

    processor = await run_stage(broker, flow, handler)
    await send(broker, flow, 1, 2, 3)
    await eventually(lambda: attempts.get(1) == 2 and 3 in attempts,
                     "record 1 redelivered and record 3 handled")
    await processor.stop()
    assert attempts[2] == 1


async def test_work_in_flight_when_a_processor_dies_is_redelivered(broker):
    flow, started, done = uuid.uuid4().hex[:8], asyncio.Event(), []

    async def stuck(work, ctx):
        started.set()
        await asyncio.Event().wait()  # never finishes: the process "dies" first

    first = await run_stage(broker, flow, stuck)
    await send(broker, flow, 7)
    await asyncio.wait_for(started.wait(), 10)
    await first.stop()  # closes its connection with the message unacknowledged

    async def finishes(work, ctx):
        done.append(work.n)

    second = await run_stage(broker, flow, finishes)
    await eventually(lambda: done == [7], "record 7 redelivered to the second processor")
    await second.stop()
