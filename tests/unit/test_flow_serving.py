"""Which flows a processor serves (``flows_of``), and how it gets there from what it
served (``FlowServing.apply``): flows started, stopped, given new parameters; the
fallback never overriding config; a flow that fails to start leaving the rest, and
tried again until it starts."""
import asyncio
from collections import Counter

from tests.support.waiting import eventually
from trustgraph.base import serving as serving_module
from trustgraph.base.flows import Flow, Parameters, flows_of, pinned
from trustgraph.base.serving import FlowServing, Served

FLOWS = {
    "a": {"blueprint-name": "b", "processors": ["text-completion", "prompt"],
          "parameters": {"llm-model": "small"}},
    "b": {"blueprint-name": "b", "processors": ["prompt"]},
    "broken": {"processors": "not a list"},
}


def test_a_processor_serves_the_flows_naming_it_or_its_family():
    served = flows_of("text-completion-openai", FLOWS)
    assert list(served) == ["a"]
    assert served["a"].parameters == {"llm-model": "small"}
    assert served["a"].blueprint == "b"
    assert sorted(flows_of("prompt", FLOWS)) == ["a", "b"]
    assert flows_of("text", FLOWS) == {}  # a family is a whole name


class FakeRunner:
    def __init__(self) -> None:
        self.parameters = Parameters("")
        self.stopped = False
        self.answering = False

    async def stop(self) -> None:
        self.stopped = True


class Starts:
    """What a processor's start_flow does, noted; flows named in ``failing`` fail."""

    def __init__(self, failing: set[str] = frozenset()) -> None:
        self.runners: dict[str, FakeRunner] = {}
        self.failing = failing
        self.attempts: Counter[str] = Counter()

    async def __call__(self, flow: Flow) -> Served:
        self.attempts[flow.id] += 1
        if flow.id in self.failing:
            raise RuntimeError("broker away")
        runner = self.runners[flow.id] = FakeRunner()
        runner.parameters = flow.parameters
        return Served(flow, services=[runner])  # type: ignore[list-item]


def config(**flows: dict) -> dict[str, Flow]:
    return {flow_id: Flow(flow_id, Parameters(flow_id, values))
            for flow_id, values in flows.items()}


async def test_apply_starts_stops_and_updates_to_match():
    starts = Starts()
    serving = FlowServing("p", starts, None)
    await serving.apply(config(a={}, b={"x": 1}))
    assert sorted(serving.flows) == ["a", "b"]
    first_b = starts.runners["b"]

    await serving.apply(config(b={"x": 2}, c={}))
    assert sorted(serving.flows) == ["b", "c"]
    assert starts.runners["a"].stopped
    assert starts.runners["b"] is first_b and not first_b.stopped  # kept, not restarted
    assert first_b.parameters == {"x": 2}


async def test_the_fallback_never_replaces_what_config_said():
    serving = FlowServing("p", Starts(), None)
    await serving.apply(config(a={}))
    await serving.apply(pinned(["default"]), from_config=False)
    assert list(serving.flows) == ["a"]

    unconfigured = FlowServing("p", Starts(), None)
    await unconfigured.apply(pinned(["default"]), from_config=False)
    assert list(unconfigured.flows) == ["default"]
    await unconfigured.apply(config())  # config answers at last: it runs no flow
    assert unconfigured.flows == {}


async def test_a_flow_that_fails_to_start_leaves_the_others_served():
    serving = FlowServing("p", Starts(failing={"bad"}), None)
    await serving.apply(config(good={}, bad={}))
    assert list(serving.flows) == ["good"]


async def test_a_flow_that_failed_to_start_is_tried_again_until_it_starts(monkeypatch):
    monkeypatch.setattr(serving_module, "RETRY_FIRST", 0.01)
    starts = Starts(failing={"late"})
    serving = FlowServing("p", starts, None)
    await serving.apply(config(late={}))
    assert serving.flows == {}
    await eventually(lambda: starts.attempts["late"] >= 3, "tries after the first")
    starts.failing = set()  # the broker is back
    await eventually(lambda: list(serving.flows) == ["late"], "the flow served")
    assert serving.shutdown() == []  # nothing more to try


async def test_a_flow_stopped_before_its_next_try_is_not_started(monkeypatch):
    monkeypatch.setattr(serving_module, "RETRY_FIRST", 0.01)
    starts = Starts(failing={"late"})
    serving = FlowServing("p", starts, None)
    await serving.apply(config(late={}))
    await serving.apply(config())  # stopped while it waits to be tried again
    starts.failing = set()
    retry = serving.shutdown()
    await asyncio.gather(*retry)
    assert serving.flows == {} and "late" not in starts.runners


async def test_a_stopped_flows_runner_is_kept_alive_while_it_answers():
    starts = Starts()
    serving = FlowServing("p", starts, None)
    await serving.apply(config(a={}))
    runner = starts.runners["a"]
    runner.answering = True
    await serving.apply(config())
    assert list(serving.runners()) == [runner]
    runner.answering = False
    assert list(serving.runners()) == []


async def test_changes_apply_one_at_a_time():
    started: list[str] = []
    gate = asyncio.Event()

    async def slow(flow: Flow) -> Served:
        started.append(flow.id)
        await gate.wait()
        return Served(flow)

    serving = FlowServing("p", slow, None)
    first = asyncio.ensure_future(serving.apply(config(a={})))
    second = asyncio.ensure_future(serving.apply(config(a={}, b={})))
    await asyncio.sleep(0)
    assert started == ["a"]  # the second waits for the first
    gate.set()
    await asyncio.gather(first, second)
    assert started == ["a", "b"]
