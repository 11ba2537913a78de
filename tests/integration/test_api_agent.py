"""The client library's ``agent`` (over the websocket) and its blocking wrapper,
against a real gateway and broker in front of a scripted agent
(tests/support/scripted_agent.py). One stack serves the module, on a flow of its own.
"""
import asyncio
import uuid

import pytest
import pytest_asyncio

from tests.support.scripted_agent import (
    MODEL,
    PROMPT_TOKENS,
    TOOL,
    AgentStack,
    arguments,
    expected_text,
    observation,
    scripted_agent_stack,
    sources_for,
    thought,
)
from trustgraph.api import (
    AgentAction,
    AgentAnswer,
    AgentFinal,
    AgentObservation,
    AgentResult,
    AgentThought,
    AsyncTrustGraph,
    Chunk,
    Final,
    Metadata,
    TrustGraph,
    TrustGraphError,
    Usage,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEADLINE = 30.0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rig(broker):
    async with scripted_agent_stack(broker.url) as stack:
        yield stack


@pytest_asyncio.fixture(loop_scope="module")
async def tg(rig):
    async with AsyncTrustGraph(rig.url) as client:
        yield client


def usage(steps: int, tokens: int) -> Usage:
    return Usage(PROMPT_TOKENS * (steps + 1), tokens, MODEL)


def joined(events: list) -> list:
    """The events with the pieces of each message joined (the gateway may have
    merged some already; how it split them is not the point)."""
    out: list = []
    for event in events:
        piece = isinstance(event, (AgentThought, AgentObservation, AgentAnswer))
        if piece and out and type(out[-1]) is type(event) and not out[-1].end_of_message:
            event = type(event)(out.pop().text + event.text, event.end_of_message)
        out.append(event)
    return out


def dialog(steps: int) -> list:
    """The scripted dialog's steps, each whole."""
    expected: list = []
    for step in range(steps):
        expected += [AgentThought("".join(thought(step)), True),
                     AgentAction(TOOL, arguments(step), TOOL),
                     AgentObservation(observation(step), True)]
    return expected


async def events_of(stream) -> list:
    async with asyncio.timeout(DEADLINE):
        return [event async for event in stream]


async def test_agent_answer(rig, tg):
    result = await tg.agent("[steps=2 tokens=6]", session_id="s-1", flow=rig.flow)
    assert isinstance(result, AgentResult) and result == expected_text(6)
    assert (result.session_id, result.usage, result.steps) == ("s-1", usage(2, 6), [])
    assert rig.agent.requests[-1].streaming is False


async def test_streaming_gives_typed_events_in_order(rig, tg):
    stream = tg.agent("[steps=2 tokens=5]", streaming=True, flow=rig.flow)
    events = joined(await events_of(stream))
    session = stream.session_id  # the agent made one: none was asked for
    assert events == dialog(2) + [AgentAnswer(expected_text(5), True),
                                  AgentFinal(usage(2, 5), session, [])]
    assert stream.usage == usage(2, 5) and session.startswith("session-")


async def test_a_collected_stream_has_the_steps(rig, tg):
    result = await tg.agent("[steps=2 tokens=3]", streaming=True, flow=rig.flow).collect()
    assert result == expected_text(3) and result.steps == dialog(2)


async def test_options_reach_the_service(rig, tg):
    await tg.agent("why?", user="ann", collection="notes", session_id="s-2",
                   group=("research", "maths"), pattern="ask", max_iterations=3,
                   state="start", history=[{"thought": "t", "action": "a"}], flow=rig.flow)
    request = rig.agent.requests[-1]
    assert (request.user, request.collection, request.session_id, request.group,
            request.pattern, request.max_iterations, request.state) == (
        "ann", "notes", "s-2", ["research", "maths"], "ask", 3, "start")
    assert request.history[0].thought == "t"


async def test_ask_sources_arrive_with_the_first_thought_and_the_final_event(rig, tg):
    events = await events_of(tg.agent("[steps=0 tokens=2]", streaming=True, pattern="ask",
                                      user="ann", flow=rig.flow))
    sources = [source.model_dump(exclude_none=True)
               for source in sources_for("document-rag", "ann", "default")]
    assert events[0] == AgentThought("route: knowledge", True)
    assert events[-1].sources == sources


async def test_service_failure_raises_after_the_answer_before_it(rig, tg):
    answer = []
    with pytest.raises(TrustGraphError) as failure:
        async for event in tg.agent("[tokens=9 fail_after=4]", streaming=True, flow=rig.flow):
            if isinstance(event, AgentAnswer):
                answer.append(event.text)
    assert (failure.value.type, failure.value.message) == ("agent-error", "scripted failure")
    assert "".join(answer) == expected_text(4)


async def test_a_bad_request_is_an_error_naming_the_field(rig, tg):
    with pytest.raises(TrustGraphError) as failure:
        await tg.agent("q", pattern="vibes", flow=rig.flow)
    assert failure.value.type == "bad-request"
    assert failure.value.message.startswith("request.pattern")


async def test_leaving_the_stream_early_cancels_the_dialog(rig, tg):
    question = f"[tokens=5000 delay=0.01] {uuid.uuid4().hex}"
    async for event in tg.agent(question, streaming=True, flow=rig.flow):
        if isinstance(event, AgentAnswer):
            break
    await rig.agent.wait_cancelled(question, 2.0)


async def test_the_answer_stream_api_in_agent_mode_gives_the_answer(rig, tg):
    answer = await tg.query("[steps=2 tokens=5]", mode="agent", flow=rig.flow)
    assert answer == expected_text(5) and answer.usage == usage(2, 5)
    events = await events_of(tg.query("[steps=1 tokens=4]", mode="agent", stream=True,
                                      flow=rig.flow))
    assert isinstance(events[0], Metadata) and isinstance(events[-1], Final)
    assert "".join(event.text for event in events if isinstance(event, Chunk)) == \
        expected_text(4)


# --- the blocking client: the same method, bridged ------------------------------------

async def test_blocking_client(rig: AgentStack):
    def use() -> tuple:
        with TrustGraph(rig.url) as tg:
            result = tg.agent("[steps=1 tokens=4]", session_id="s-3", flow=rig.flow)
            stream = tg.agent("[steps=1 tokens=7]", streaming=True, flow=rig.flow)
            return result, list(stream), stream.session_id

    result, events, session = await asyncio.wait_for(asyncio.to_thread(use), DEADLINE)
    assert result == expected_text(4) and result.session_id == "s-3"
    assert joined(events) == dialog(1) + [AgentAnswer(expected_text(7), True),
                                          AgentFinal(usage(1, 7), session, [])]


async def test_blocking_client_leaving_a_stream_cancels_it(rig):
    question = f"[tokens=5000 delay=0.01] {uuid.uuid4().hex}"

    def use() -> None:
        with TrustGraph(rig.url) as tg:
            for event in tg.agent(question, streaming=True, flow=rig.flow):
                if isinstance(event, AgentObservation):
                    break

    await asyncio.wait_for(asyncio.to_thread(use), DEADLINE)
    await rig.agent.wait_cancelled(question, 2.0)
