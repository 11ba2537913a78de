"""The gateway's ``agent`` row (websocket and REST, PROTOCOL §1–§3) and the
answer-stream API's ``mode: "agent"``, on a real broker in front of a scripted agent
(tests/support/scripted_agent.py) that answers with the frame sequence of PROTOCOL
§2 and seed 003. One gateway and one processor serve the module, on a flow of its own.
"""
import json
import uuid

import aiohttp
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
from trustgraph.gateway.apis.lines import (
    CollectedAgentAnswer,
    ContentLine,
    DoneLine,
    MetadataLine,
    StepLine,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEADLINE = 30.0
FLAGS = {"end_of_message": False, "end_of_dialog": False, "end_of_stream": False}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rig(broker):
    async with scripted_agent_stack(broker.url) as stack:
        yield stack


def agent_frame(rig: AgentStack, request: dict, **envelope) -> dict:
    return {"id": uuid.uuid4().hex, "service": "agent", "flow": rig.flow, **envelope,
            "request": request}


def piece(kind: str, content: str, **fields) -> dict:
    return {"chunk_type": kind, "message_type": kind, "content": content, **FLAGS, **fields}


def messages(records: list[dict]) -> list[tuple[str, str]]:
    """Each message of a dialog, its pieces joined: ``(chunk_type, content)``. A
    message ends with its ``end_of_message`` piece (or where the type changes)."""
    joined: list[tuple[str, str]] = []
    open_kind = None
    for record in records:
        kind = record["chunk_type"]
        if kind == open_kind:
            joined[-1] = (kind, joined[-1][1] + record["content"])
        else:
            joined.append((kind, record["content"]))
        open_kind = None if record["end_of_message"] else kind
    return joined


def dialog(steps: int, tokens: int) -> list[tuple[str, str]]:
    """The scripted dialog's messages."""
    expected: list[tuple[str, str]] = []
    for step in range(steps):
        expected += [("thought", "".join(thought(step))), ("action", TOOL),
                     ("observation", observation(step))]
    return expected + [("answer", expected_text(tokens))]


def totals(steps: int, tokens: int, session_id: str) -> dict:
    return {"in_token": PROMPT_TOKENS * (steps + 1), "out_token": tokens, "model": MODEL,
            "session_id": session_id}


# --- the websocket: PROTOCOL §2 frames, in seed 003's order (frames_of: conftest.py) --

async def test_streaming_frames_follow_the_dialog(rig, frames_of):
    frames = await frames_of(agent_frame(rig, {"question": "[steps=2 tokens=4]",
                                               "streaming": True}))
    records = [frame["response"] for frame in frames]
    assert [frame["complete"] for frame in frames] == [False] * (len(frames) - 1) + [True]
    assert messages(records) == dialog(2, 4)
    session = records[-1]["session_id"]
    # Each kind of frame, exactly; pieces of a message may arrive merged, never mixed.
    assert records[0] == piece("thought", records[0]["content"])
    assert piece("action", TOOL, end_of_message=True, tool=TOOL,
                 arguments=arguments(1)) in records
    assert piece("observation", observation(0), end_of_message=True) in records
    assert records[-1] == piece("answer", "tok3 ", end_of_message=True, end_of_dialog=True,
                                end_of_stream=True, **totals(2, 4, session))
    assert session.startswith("session-")


async def test_thought_pieces_and_answer_pieces_stay_apart_when_merged(rig, frames_of):
    # 600 answer pieces as fast as the service can: a reader that falls behind gets
    # merged pieces, but a thought never runs into the answer, nor the end of a message
    # into the next one.
    frames = await frames_of(agent_frame(rig, {"question": "[steps=3 tokens=600]",
                                               "streaming": True}))
    records = [frame["response"] for frame in frames]
    assert messages(records) == dialog(3, 600)
    assert all(len({record["chunk_type"], record["message_type"]}) == 1 for record in records)
    assert [record["end_of_dialog"] for record in records].count(True) == 1


async def test_non_streaming_is_one_frame_with_the_whole_answer(rig, frames_of):
    [frame] = await frames_of(agent_frame(rig, {"question": "[steps=2 tokens=6]",
                                                "session_id": "s-1"}))
    assert frame["complete"] and frame["response"] == piece(
        "answer", expected_text(6), end_of_message=True, end_of_dialog=True,
        end_of_stream=True, **totals(2, 6, "s-1"))


async def test_options_and_tenant_reach_the_service(rig, frames_of):
    await frames_of(agent_frame(rig, {
        "question": "why?", "session-id": "s-2", "group": ["research", "maths"],
        "pattern": "ask", "max-iterations": 4, "collection": "papers", "state": "start",
        "history": [{"thought": "t", "action": "search", "arguments": {"q": "x"},
                     "observation": "o"}]}, user="alice"))
    request = rig.agent.requests[-1]
    assert (request.question, request.session_id, request.group, request.pattern,
            request.max_iterations, request.user, request.collection, request.state) == (
        "why?", "s-2", ["research", "maths"], "ask", 4, "alice", "papers", "start")
    assert request.history[0].arguments == {"q": "x"} and request.streaming is False


async def test_ask_sources_come_with_the_first_thought(rig, frames_of):
    frames = await frames_of(agent_frame(rig, {"question": "[steps=0 tokens=2]",
                                               "pattern": "ask", "streaming": True}))
    first = frames[0]["response"]
    assert first == piece("thought", "route: knowledge", end_of_message=True,
                          route="knowledge", sources=[
                              source.model_dump(exclude_none=True)
                              for source in sources_for("document-rag", "trustgraph",
                                                        "default")])


async def test_service_error_mid_dialog_is_the_last_frame(rig, frames_of):
    frames = await frames_of(agent_frame(rig, {"question": "[steps=1 tokens=9 fail_after=3]",
                                               "streaming": True}))
    records = [frame["response"] for frame in frames]
    assert messages(records[:-1]) == dialog(1, 3)
    assert frames[-1]["complete"] and records[-1] == {
        "chunk_type": "error", "message_type": "error", "content": "scripted failure",
        "end_of_message": True, "end_of_dialog": True, "end_of_stream": True,
        "error": {"type": "agent-error", "message": "scripted failure"}}


@pytest.mark.parametrize("request_body, named", [
    ({"streaming": True}, "request.question"),
    ({"question": ""}, "request.question"),
    ({"question": "q", "pattern": "vibes"}, "request.pattern"),
    ({"question": "q", "max_iterations": 0}, "request.max_iterations"),
    ({"question": "q", "group": "research"}, "request.group"),
])
async def test_bad_agent_requests_name_the_field(rig, frames_of, request_body, named):
    [frame] = await frames_of(agent_frame(rig, request_body))
    assert frame["error"]["type"] == "bad-request"
    assert frame["error"]["message"].startswith(named), frame


async def test_closing_the_socket_mid_dialog_cancels_it(rig):
    question = f"[tokens=5000 delay=0.01] {uuid.uuid4().hex}"
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(rig.url + "api/v1/socket") as ws:
            await ws.send_json(agent_frame(rig, {"question": question, "streaming": True}))
            while (await ws.receive_json())["response"]["chunk_type"] != "answer":
                pass
    await rig.agent.wait_cancelled(question, 2.0)


async def test_a_cancel_frame_stops_the_dialog(rig, ws):
    question = f"[tokens=5000 delay=0.01] {uuid.uuid4().hex}"
    frame = agent_frame(rig, {"question": question, "streaming": True})
    await ws.send_json(frame)
    assert (await ws.receive_json())["response"]["chunk_type"] == "thought"
    await ws.send_json({"type": "cancel", "id": frame["id"]})
    await rig.agent.wait_cancelled(question, 2.0)


# --- REST on the service path --------------------------------------------------------

def service_url(rig: AgentStack) -> str:
    return f"{rig.url}api/v1/flow/{rig.flow}/service/agent"


async def test_rest_json_ndjson_and_sse(rig, http):
    async with http.post(service_url(rig), json={"question": "[tokens=4]",
                                                 "session_id": "s-3"}) as response:
        assert response.status == 200
        assert await response.json() == piece(
            "answer", expected_text(4), end_of_message=True, end_of_dialog=True,
            end_of_stream=True, **totals(1, 4, "s-3"))

    async with http.post(service_url(rig), json={"question": "[steps=2 tokens=30]",
                                                 "streaming": True}) as response:
        assert response.content_type == "application/x-ndjson"
        records = [json.loads(line) async for line in response.content if line.strip()]
    assert messages(records) == dialog(2, 30)
    assert [record["end_of_dialog"] for record in records].count(True) == 1

    async with http.post(service_url(rig), json={"question": "[tokens=8]"},
                         headers={"Accept": "text/event-stream"}) as response:
        assert response.content_type == "text/event-stream"
        events = [json.loads(block.removeprefix("data: "))
                  for block in (await response.text()).split("\n\n") if block]
    assert messages(events) == dialog(1, 8)  # Accept turned streaming on


async def test_rest_failure_is_502_or_the_last_line(rig, http):
    async with http.post(service_url(rig), json={"question": "[fail_after=0]"}) as response:
        assert response.status == 502
        assert (await response.json())["error"] == {"type": "agent-error",
                                                    "message": "scripted failure"}
    async with http.post(service_url(rig), json={"question": "[tokens=5 fail_after=2]",
                                                 "streaming": True}) as response:
        records = [json.loads(line) async for line in response.content if line.strip()]
    assert messages(records[:-1]) == dialog(1, 2)
    assert records[-1]["error"]["type"] == "agent-error"


async def test_rest_bad_request_is_400_naming_the_field(rig, http):
    async with http.post(service_url(rig), json={"question": "q", "pattern": 3}) as response:
        assert response.status == 400
        error = (await response.json())["error"]
    assert error["type"] == "bad-request" and error["message"].startswith("request.pattern")


async def test_dropped_service_stream_cancels_the_dialog(rig, http):
    question = f"[tokens=5000 delay=0.01] {uuid.uuid4().hex}"
    response = await http.post(service_url(rig), json={"question": question,
                                                       "streaming": True})
    assert json.loads(await response.content.readline())["chunk_type"] == "thought"
    response.close()
    await rig.agent.wait_cancelled(question, 2.0)


# --- the answer-stream API, mode agent ------------------------------------------------

async def query_lines(http, url: str, body: dict) -> list[dict]:
    async with http.post(url, json=body) as response:
        assert response.status == 200, await response.text()
        assert response.content_type == "application/x-ndjson"
        return [json.loads(line) async for line in response.content if line.strip()]


def step_messages(lines: list[dict]) -> list[tuple[str, str]]:
    """The steps and the answer in the lines, consecutive pieces of a kind joined."""
    joined: list[tuple[str, str]] = []
    for line in lines:
        kind = line["chunk_type"] if line["type"] == "step" else "answer"
        if joined and joined[-1][0] == kind and kind != "action":
            joined[-1] = (kind, joined[-1][1] + line["delta"])
        else:
            joined.append((kind, line["delta"]))
    return joined


@pytest.mark.parametrize("path", ["api/v1/query", "query"])
async def test_query_agent_streams_steps_content_and_done(rig, http, path):
    lines = await query_lines(http, rig.url + path, {
        "query": "[steps=2 tokens=25]", "stream": True, "mode": "agent", "flow": rig.flow,
        "collection": "papers", "user": "bob", "session_id": "s-4", "group": ["g"],
        "pattern": "react"})
    metadata, *middle, done = lines
    assert metadata == {"type": "metadata", "sources": [], "optimized_query": None,
                        "subqueries": [], "request_id": rig.agent.ids[-1]}
    assert step_messages(middle) == dialog(2, 25)
    assert {"type": "step", "chunk_type": "action", "delta": TOOL, "tool": TOOL,
            "arguments": arguments(0)} in middle
    for line in middle:
        {"step": StepLine, "content": ContentLine}[line["type"]].model_validate(line)
    assert done == {"type": "done", "usage": {"in_token": PROMPT_TOKENS * 3, "out_token": 25,
                                              "model": MODEL}, "session_id": "s-4"}
    MetadataLine.model_validate(metadata)
    DoneLine.model_validate(done)
    request = rig.agent.requests[-1]
    assert (request.question, request.user, request.collection, request.session_id,
            request.group, request.pattern, request.streaming) == (
        "[steps=2 tokens=25]", "bob", "papers", "s-4", ["g"], "react", True)


async def test_query_agent_ask_sources_are_in_the_metadata_line(rig, http):
    lines = await query_lines(http, rig.url + "api/v1/query", {
        "query": "[steps=0 tokens=3]", "stream": True, "mode": "agent", "pattern": "ask",
        "flow": rig.flow})
    assert lines[0]["sources"] == [source.model_dump(exclude_none=True) for source in
                                   sources_for("document-rag", "trustgraph", "default")]
    assert lines[1] == {"type": "step", "chunk_type": "thought", "delta": "route: knowledge"}


async def test_query_agent_without_stream_is_one_object(rig, http):
    async with http.post(rig.url + "query", json={
            "query": "[steps=1 tokens=9]", "mode": "agent", "flow": rig.flow}) as response:
        assert response.status == 200 and response.content_type == "application/json"
        body = await response.json()
    session = body["session_id"]
    assert body == {
        "response": expected_text(9), "sources": [], "request_id": rig.agent.ids[-1],
        "session_id": session, "steps": [
            {"chunk_type": "thought", "content": "".join(thought(0))},
            {"chunk_type": "action", "content": TOOL, "tool": TOOL, "arguments": arguments(0)},
            {"chunk_type": "observation", "content": observation(0)}],
        "usage": {"in_token": PROMPT_TOKENS * 2, "out_token": 9, "model": MODEL}}
    CollectedAgentAnswer.model_validate(body)
    assert session.startswith("session-")


async def test_query_agent_failure_mid_answer_ends_with_an_error_line(rig, http):
    lines = await query_lines(http, rig.url + "api/v1/query", {
        "query": "[tokens=10 fail_after=3]", "stream": True, "mode": "agent",
        "flow": rig.flow})
    assert step_messages(lines[1:-1]) == dialog(1, 3)
    assert lines[-1] == {"type": "error", "message": "scripted failure",
                         "error_type": "agent-error"}


@pytest.mark.parametrize("body, named", [
    ({"mode": "agent", "optimize_query": True}, "optimize_query: not a parameter"),
    ({"mode": "agent", "doc_limit": 3}, "doc_limit: not a parameter"),
    ({"mode": "agent", "pattern": "vibes"}, "pattern:"),
    ({"mode": "agent", "max_iterations": 0}, "max_iterations:"),
    ({"mode": "agent", "group": "g"}, "group:"),
    ({"mode": "document", "session_id": "s"}, "session_id: not a parameter of mode"),
    ({"mode": "graph", "pattern": "ask"}, "pattern: not a parameter of mode 'graph'"),
])
async def test_query_agent_bad_input_is_400_naming_the_field(rig, http, body, named):
    async with http.post(rig.url + "api/v1/query", json={
            "query": "q", "flow": rig.flow, **body}) as response:
        assert response.status == 400
        error = (await response.json())["error"]
    assert error["type"] == "bad-request" and error["message"].startswith(named), error


async def test_dropped_query_stream_cancels_the_dialog(rig, http):
    question = f"[tokens=5000 delay=0.01] {uuid.uuid4().hex}"
    response = await http.post(rig.url + "api/v1/query", json={
        "query": question, "stream": True, "mode": "agent", "flow": rig.flow})
    assert json.loads(await response.content.readline())["type"] == "metadata"
    assert json.loads(await response.content.readline())["type"] == "step"
    response.close()
    await rig.agent.wait_cancelled(question, 2.0)


async def test_openapi_describes_the_agent(rig, http):
    async with http.get(rig.url + "api/v1/openapi.json") as response:
        spec = await response.json()
    operation = spec["paths"]["/api/v1/flow/{flow}/service/agent"]["post"]
    assert operation["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/AgentRequest"}
    schemas = spec["components"]["schemas"]
    assert schemas["AgentRequest"]["required"] == ["question"]
    assert {"chunk_type", "message_type", "content", "end_of_message", "end_of_dialog",
            "tool", "arguments", "session_id"} <= set(schemas["AgentResponse"]["properties"])
    query = schemas["QueryRequest"]["properties"]
    assert "agent" in query["mode"]["enum"]
    assert {"session_id", "group", "pattern"} <= set(query)
    assert {"StepLine", "CollectedAgentAnswer"} <= set(schemas)
    assert "session_id" in schemas["DoneLine"]["properties"]
