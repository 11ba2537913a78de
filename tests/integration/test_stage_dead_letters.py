"""A pipeline record is not redelivered for ever (real pulsar-lite broker): after
``TG_MAX_DELIVERIES`` deliveries it goes, as it was, to its stage's dead-letter topic
with where it came from, how often it was tried and the last error, and is
acknowledged; the stage goes on with the rest. A record whose handling ends the
process every time (each crash is a delivery too) is dead-lettered without being
handled again."""
import asyncio
import uuid

from tests.support.waiting import eventually
from trustgraph.base import Processor, ProcessorSettings, ProcessorSpec, Stage
from trustgraph.base.stage import DEAD_LETTER_SUBSCRIPTION, Emitters, dead_letter_topic
from trustgraph.pubsub import Bus
from trustgraph.schema import Record, encode, flow_topic

DEADLINE = 30.0


class Work(Record):
    n: int


async def run_stage(broker, flow, handler, max_deliveries):
    spec = ProcessorSpec("dead-letter-test", ProcessorSettings,
                         lambda s: [Stage("work", Work, handler, subscription="worker")])
    processor = Processor(spec, ProcessorSettings(pulsar_url=broker.url, tg_flows=[flow],
                                                  tg_max_deliveries=max_deliveries))
    await processor.start()
    return processor


async def send(bus, flow, *numbers):
    emit = Emitters(bus, flow).emit
    for n in numbers:
        await emit("work", Work(n=n))


async def next_message(consumer):
    return await asyncio.wait_for(consumer.receive(), DEADLINE)


async def test_a_record_that_keeps_failing_is_dead_lettered_and_acknowledged(broker, caplog):
    flow, attempts, done = uuid.uuid4().hex[:8], {}, []
    bus = Bus(broker.url)

    async def handler(work, ctx):
        attempts[work.n] = attempts.get(work.n, 0) + 1
        if work.n == 1:
            raise RuntimeError("the store refuses this record")
        done.append(work.n)

    dead = await bus.subscribe(dead_letter_topic("work", "worker", flow), "test")
    processor = await run_stage(broker, flow, handler, max_deliveries=3)
    await send(bus, flow, 1, 2)
    letter = await next_message(dead)  # after two redeliveries, 2 s apart
    # Stopped once it says it acknowledged: a stop between the letter and the
    # acknowledgement leaves the record to be redelivered (and dead-lettered again).
    await eventually(lambda: "and acknowledged" in caplog.text, "the acknowledgement",
                     timeout=DEADLINE)
    await processor.stop()
    assert letter.data() == encode(Work(n=1))
    properties = letter.properties()
    assert {k: properties[k] for k in ("stage", "subscription", "flow", "deliveries")} == {
        "stage": "work", "subscription": "worker", "flow": flow, "deliveries": "3"}
    assert properties["error"] == "RuntimeError: the store refuses this record"
    assert attempts == {1: 3, 2: 1} and done == [2]

    # Acknowledged: the stage's subscription holds nothing before a record sent now.
    await send(bus, flow, 99)
    worker = await bus.subscribe(flow_topic("work", flow), "worker")
    assert Work.model_validate_json((await next_message(worker)).data()).n == 99
    # The dead-letter subscription keeps it for whoever looks later.
    keeper = await bus.subscribe(dead_letter_topic("work", "worker", flow),
                                 DEAD_LETTER_SUBSCRIPTION)
    assert (await next_message(keeper)).data() == encode(Work(n=1))
    await bus.close()


async def test_a_record_whose_handling_ends_the_process_is_not_handled_again(broker):
    flow, attempts = uuid.uuid4().hex[:8], []
    bus = Bus(broker.url)
    await send(bus, flow, 7)
    for _ in range(3):  # three processes died holding it (each a delivery)
        doomed = Bus(broker.url)
        consumer = await doomed.subscribe(flow_topic("work", flow), "worker")
        assert Work.model_validate_json((await next_message(consumer)).data()).n == 7
        await doomed.close()  # gone without acknowledging

    async def handler(work, ctx):
        attempts.append(work.n)

    dead = await bus.subscribe(dead_letter_topic("work", "worker", flow), "test")
    processor = await run_stage(broker, flow, handler, max_deliveries=3)
    letter = await next_message(dead)
    await send(bus, flow, 8)
    await eventually(lambda: attempts == [8], "record 8 handled", timeout=DEADLINE)
    await processor.stop()
    await bus.close()
    assert letter.data() == encode(Work(n=7))
    assert letter.properties()["deliveries"] == "4"
    assert "not settled after 3 deliveries" in letter.properties()["error"]
