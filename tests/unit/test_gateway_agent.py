"""The gateway's agent parts that need no broker: the ``agent`` row's framing (which
waiting pieces may merge) and the answer-stream API's mode agent (request parsing,
records to lines, the collected answer)."""
import json

import pytest

from tests.support.answer_lines import AnswerLines
from tests.support.answer_lines import lines_of as read_lines
from trustgraph.base import ServiceError
from trustgraph.gateway.apis.lines import (
    CollectedAgentAnswer,
    ContentLine,
    DoneLine,
    MetadataLine,
    StepLine,
)
from trustgraph.gateway.apis.query import parse
from trustgraph.gateway.core.dispatch import Dispatcher, wired
from trustgraph.gateway.core.errors import GatewayError
from trustgraph.gateway.core.services import SERVICES
from trustgraph.schema import AgentResponse, Error, Source, encode

ROW = SERVICES["agent"]
SOURCE = Source(id="u/c/d1/c0", document_id="d1", title="One", text="one", distance=0.25)


def record(kind: str, content: str = "", final: bool = False, **fields) -> tuple[bytes, bool]:
    return encode(AgentResponse(chunk_type=kind, content=content, end_of_dialog=final,
                                **fields)), final


def action(tool: str = "search") -> tuple[bytes, bool]:
    return record("action", tool, end_of_message=True, tool=tool, arguments={"q": "x"})


def decoded(batch) -> list[dict]:
    return [json.loads(data) for data, _ in batch]


# --- the agent row on the wire -------------------------------------------------------

def test_waiting_pieces_merge_only_within_one_message():
    batch = [record("thought", "a"), record("thought", "b"),
             record("thought", "c", end_of_message=True), action(),
             record("observation", "seen", end_of_message=True),
             record("thought", "d"), record("answer", "x", in_token=1),
             record("answer", "y", in_token=2),
             record("answer", "z", True, end_of_message=True, in_token=5, out_token=3,
                    model="m", session_id="s")]
    wire = wired(ROW, batch, first=True)
    assert [(r["chunk_type"], r["content"], r["end_of_message"]) for r in decoded(wire)] == [
        ("thought", "ab", False), ("thought", "c", True), ("action", "search", True),
        ("observation", "seen", True), ("thought", "d", False), ("answer", "xy", False),
        ("answer", "z", True)]
    assert decoded(wire)[5]["in_token"] == 3  # token counts summed over the merged pieces
    assert wire[2] == batch[3] and wire[-1] == batch[-1]  # whole frames pass untouched
    assert [final for _, final in wire] == [False] * 6 + [True]


def test_two_actions_in_a_row_stay_two_frames():
    wire = wired(ROW, [action("a"), action("b")])
    assert [r["tool"] for r in decoded(wire)] == ["a", "b"]


# --- the answer-stream API, mode agent: requests --------------------------------------

DISPATCHER = Dispatcher(bus=None, flows=["default"], timeout=1)


def test_parse_builds_a_streaming_agent_request():
    query, row, request = parse(DISPATCHER, {
        "query": "why?", "mode": "agent", "user": "alice", "collection": "c",
        "session-id": "s", "group": ["g"], "pattern": "ask", "max_iterations": 3})
    assert row.name == "agent" and query.stream is False
    assert (request.question, request.user, request.collection, request.session_id,
            request.group, request.pattern, request.max_iterations, request.streaming) == (
        "why?", "alice", "c", "s", ["g"], "ask", 3, True)


@pytest.mark.parametrize("body, starts", [
    ({"query": "q", "mode": "agent", "subqueries": True}, "subqueries: not a parameter"),
    ({"query": "q", "mode": "agent", "entity_limit": 3}, "entity_limit: not a parameter"),
    ({"query": "q", "mode": "agent", "pattern": "plan"}, "pattern: Input should be"),
    ({"query": "q", "mode": "agent", "max_iterations": 99}, "max_iterations: Input should"),
    ({"query": "q", "mode": "graph", "group": ["g"]}, "group: not a parameter of mode"),
    ({"query": "q", "max_iterations": 3}, "max_iterations: not a parameter of mode"),
    ({"query": "q", "session_id": "s"}, "session_id: not a parameter of mode 'document'"),
])
def test_parse_refuses_naming_the_field(body, starts):
    with pytest.raises(GatewayError) as failure:
        parse(DISPATCHER, body)
    assert failure.value.status == 400 and failure.value.message.startswith(starts)


# --- the answer-stream API, mode agent: lines ----------------------------------------

async def lines_of(*frames) -> tuple[AnswerLines, list[dict]]:
    return await read_lines(AgentResponse, *frames)


async def test_a_dialog_becomes_metadata_steps_content_and_done():
    lines, out = await lines_of(
        record("thought", "route", end_of_message=True, sources=[SOURCE]),
        record("thought", "a"), record("thought", "b", end_of_message=True), action(),
        record("observation", "seen", end_of_message=True), record("answer", "x"),
        record("answer", "y", True, end_of_message=True, in_token=5, out_token=3, model="m",
               session_id="s"))
    assert out == [
        {"type": "metadata", "sources": [SOURCE.model_dump(exclude_none=True)],
         "optimized_query": None, "subqueries": [], "request_id": "rid"},
        {"type": "step", "chunk_type": "thought", "delta": "route"},
        {"type": "step", "chunk_type": "thought", "delta": "a"},
        {"type": "step", "chunk_type": "thought", "delta": "b"},
        {"type": "step", "chunk_type": "action", "delta": "search", "tool": "search",
         "arguments": {"q": "x"}},
        {"type": "step", "chunk_type": "observation", "delta": "seen"},
        {"type": "content", "delta": "x"}, {"type": "content", "delta": "y"},
        {"type": "done", "usage": {"in_token": 5, "out_token": 3, "model": "m"},
         "session_id": "s"}]
    models = {"metadata": MetadataLine, "step": StepLine, "content": ContentLine,
              "done": DoneLine}
    for line in out:
        models[line["type"]].model_validate(line)
    collected = lines.collected()
    assert collected["steps"] == [
        {"chunk_type": "thought", "content": "route"},
        {"chunk_type": "thought", "content": "ab"},
        {"chunk_type": "action", "content": "search", "tool": "search", "arguments": {"q": "x"}},
        {"chunk_type": "observation", "content": "seen"}]
    assert (collected["response"], collected["session_id"]) == ("xy", "s")
    CollectedAgentAnswer.model_validate(collected)


async def test_empty_pieces_make_no_lines():
    _, out = await lines_of(record("thought", "t"), record("thought", "", end_of_message=True),
                      record("answer", "", True, end_of_message=True))
    assert [line["type"] for line in out] == ["metadata", "step", "done"]


@pytest.mark.parametrize("failed", [
    encode(AgentResponse.failure(Error(type="agent-error", message="no tool"))),
    encode(AgentResponse(chunk_type="error", content="no tool", end_of_dialog=True)),
])
async def test_an_error_frame_raises_the_agents_error(failed):
    with pytest.raises(ServiceError) as failure:
        await lines_of(record("thought", "t"), (failed, True))
    assert (failure.value.error.type, failure.value.error.message) == ("agent-error", "no tool")
