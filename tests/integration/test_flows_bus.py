"""Flows started and stopped while processors run (real broker, real config and flow
services): a processor following config serves a flow as soon as it starts, with its
parameters; a stopped flow takes no new request, finishes the one in hand, and keeps
the records waiting on its stages for when it starts again; a processor that starts
later serves the flows already running; replicas share a flow's work."""
import asyncio
import uuid

import pytest

from tests.support.flows import FlowService
from tests.support.waiting import eventually, serving
from trustgraph.base import (
    FlowParameters,
    Processor,
    ProcessorSettings,
    ProcessorSpec,
    Requester,
    Service,
    ServiceError,
    Stage,
    Timing,
)
from trustgraph.base.stage import Emitters
from trustgraph.config.service import SPEC as CONFIG_SPEC
from trustgraph.schema import Record, Response, flow_topic


class Echo(Record):
    text: str = ""
    wait: bool = False


class Echoed(Response):
    text: str = ""


class Work(Record):
    n: int


class Model(FlowParameters):
    llm_model: str | None = None


class Echoing:
    """A processor of one service (``echo``: the text and its flow's ``llm-model``)
    and one stage (``work``: records noted with the phase the test is in)."""

    def __init__(self) -> None:
        self.name = f"echo-{uuid.uuid4().hex[:6]}"
        self.handled: list[tuple[str, int, str]] = []  # (flow, n, phase)
        self.phase = "first"
        self.waiting = asyncio.Event()  # a request is being answered
        self.release = asyncio.Event()

    def spec(self) -> ProcessorSpec:
        async def echo(request: Echo, ctx) -> Echoed:
            if request.wait:
                self.waiting.set()
                await self.release.wait()
            model = ctx.parameters.of(Model).llm_model
            return Echoed(text=f"{request.text} from {model}", end_of_stream=True)

        async def work(record: Work, ctx) -> None:
            self.handled.append((ctx.flow, record.n, self.phase))

        return ProcessorSpec(self.name, ProcessorSettings, lambda runtime: [
            Service("echo", Echo, Echoed, echo), Stage("work", Work, work)])

    def blueprint(self) -> dict:
        return {"description": "echo", "processors": [self.name],
                "parameters": {"llm-model": {"type": "llm-model"}}}


@pytest.fixture
async def stack(broker, tmp_path, bus):
    """A config processor, the flow service's client, and processors to stop after."""
    started: list[Processor] = []

    async def start(spec, **settings) -> Processor:
        processor = Processor(spec, ProcessorSettings(pulsar_url=broker.url, **settings))
        started.append(processor)
        await processor.start()
        return processor

    await start(CONFIG_SPEC, tg_data_dir=str(tmp_path))
    flows = await FlowService(bus).started()
    yield start, flows
    for processor in reversed(started):
        await processor.stop()


async def ask(bus, flow: str, text: str, timeout: float = 10.0, **fields) -> str:
    requester = Requester(bus, "echo", flow, f"t-{uuid.uuid4().hex[:6]}",
                          Timing(timeout=timeout, accept_timeout=2.0))
    await requester.start()
    return (await requester.call(Echo(text=text, **fields), Echoed)).text


async def test_a_started_flow_is_served_with_its_parameters_and_a_stopped_one_is_not(
        stack, bus):
    start, flows = stack
    echoing = Echoing()
    processor = await start(echoing.spec())
    assert processor.flows == {}  # config runs no flow of its blueprint yet
    await flows.put_blueprint(echoing.name, echoing.blueprint())
    flow = f"f-{uuid.uuid4().hex[:6]}"
    await flows.start(flow, echoing.name, **{"llm-model": "small"})
    await serving(bus, "echo", flow, Echo(text="probe"), Echoed)
    assert await ask(bus, flow, "hello") == "hello from small"
    assert processor.flows[flow].parameters == {"llm-model": "small"}

    await flows.stop(flow)
    await eventually(lambda: flow not in processor.flows, "the flow stopped")
    with pytest.raises(ServiceError) as refused:
        await ask(bus, flow, "anyone?")
    assert refused.value.error.type == "no-service"


async def test_an_answer_in_hand_finishes_after_its_flow_stops(stack, bus):
    start, flows = stack
    echoing = Echoing()
    processor = await start(echoing.spec())
    await flows.put_blueprint(echoing.name, echoing.blueprint())
    flow = f"f-{uuid.uuid4().hex[:6]}"
    await flows.start(flow, echoing.name, **{"llm-model": "m"})
    await serving(bus, "echo", flow, Echo(text="probe"), Echoed)
    answer = asyncio.ensure_future(ask(bus, flow, "slow", wait=True))
    await asyncio.wait_for(echoing.waiting.wait(), 10)
    await flows.stop(flow)
    await eventually(lambda: flow not in processor.flows, "the flow stopped")
    echoing.release.set()
    assert await asyncio.wait_for(answer, 10) == "slow from m"


async def test_records_waiting_for_a_stopped_flow_are_handled_once_it_starts_again(
        stack, bus):
    start, flows = stack
    echoing = Echoing()
    processor = await start(echoing.spec())
    await flows.put_blueprint(echoing.name, echoing.blueprint())
    flow = f"f-{uuid.uuid4().hex[:6]}"
    await flows.start(flow, echoing.name)
    emit = Emitters(bus, flow).emit
    await eventually(lambda: flow in processor.flows, "the flow served")
    await emit("work", Work(n=0))
    await eventually(lambda: len(echoing.handled) == 1, "the first record handled")

    await flows.stop(flow)
    await eventually(lambda: flow not in processor.flows, "the flow stopped")
    echoing.phase = "stopped"
    for n in range(1, 21):
        await emit("work", Work(n=n))
    assert await waiting(bus, flow) == list(range(1, 21))
    echoing.phase = "started again"
    await flows.start(flow, echoing.name)
    await eventually(lambda: len(echoing.handled) >= 21, "the waiting records handled")
    assert sorted(n for _, n, _ in echoing.handled) == list(range(21))
    assert {phase for _, n, phase in echoing.handled if n} == {"started again"}


async def waiting(bus, flow: str) -> list[int]:
    """The records waiting in the ``work`` stage's subscription: read by a consumer
    of our own on it, and left there (never acknowledged)."""
    consumer = await bus.subscribe(flow_topic("work", flow), "work")
    seen: list[int] = []
    try:
        async with asyncio.timeout(10):
            while len(seen) < 20:
                seen.append(Work.model_validate_json((await consumer.receive()).data()).n)
    finally:
        await bus.release(consumer)
    return sorted(seen)


async def test_a_processor_started_later_serves_the_flows_running(stack, bus):
    start, flows = stack
    echoing = Echoing()
    await flows.put_blueprint(echoing.name, echoing.blueprint())
    flow = f"f-{uuid.uuid4().hex[:6]}"
    await flows.start(flow, echoing.name, **{"llm-model": "late"})
    processor = await start(echoing.spec())
    assert set(processor.flows) == {flow}  # served once start() returns
    assert await ask(bus, flow, "hi") == "hi from late"


async def test_replicas_share_a_flow_started_while_they_run(stack, bus):
    start, flows = stack
    echoing = Echoing()
    spec = echoing.spec()
    replicas = [await start(spec, tg_replica=i) for i in range(2)]
    await flows.put_blueprint(echoing.name, echoing.blueprint())
    flow = f"f-{uuid.uuid4().hex[:6]}"
    await flows.start(flow, echoing.name)
    await eventually(lambda: all(flow in r.flows for r in replicas), "both serving")
    emit = Emitters(bus, flow).emit
    for n in range(40):
        await emit("work", Work(n=n))
    await eventually(lambda: len(echoing.handled) == 40, "every record handled")
    assert sorted(n for _, n, _ in echoing.handled) == list(range(40))


async def test_a_pinned_processor_ignores_flow_config(stack, bus):
    start, flows = stack
    echoing = Echoing()
    flow = f"pinned-{uuid.uuid4().hex[:6]}"
    processor = await start(echoing.spec(), tg_flows=[flow])
    assert set(processor.flows) == {flow}
    assert await ask(bus, flow, "hi") == "hi from None"


async def test_without_config_a_following_processor_serves_the_default_flow(broker):
    echoing = Echoing()
    processor = Processor(echoing.spec(), ProcessorSettings(pulsar_url=broker.url,
                                                            tg_config_wait=0.2))
    await processor.start()
    try:
        assert set(processor.flows) == {"default"}
    finally:
        await processor.stop()
