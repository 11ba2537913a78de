"""The gateway's ``graph-rag`` and ``document-rag`` rows (websocket and REST, PROTOCOL
§1–§3) and the answer-stream API ``/api/v1/query``, on a real broker in front of
scripted RAG services (tests/support/scripted_rag.py) that answer with the record
sequence of PROTOCOL §2. One gateway and one processor serve the module, on a flow of
its own.
"""
import json
import uuid

import pytest
import pytest_asyncio

from tests.support.scripted_rag import (
    MODEL,
    PROMPT_TOKENS,
    ScriptedRagGateway,
    expected_text,
    scripted_rag_gateway,
    wire_sources,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEADLINE = 30.0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rig(broker):
    async with scripted_rag_gateway(broker.url) as stack:
        yield stack


def rag_frame(rig: ScriptedRagGateway, service: str, request: dict, **envelope) -> dict:
    return {"id": uuid.uuid4().hex, "service": service, "flow": rig.flow, **envelope,
            "request": request}


# --- the websocket: exact PROTOCOL §2 frames (frames_of: conftest.py) ----------------

@pytest.mark.parametrize("service", ["graph-rag", "document-rag"])
async def test_streaming_frames_are_metadata_deltas_and_one_empty_final(rig, frames_of, service):
    frames = await frames_of(rag_frame(rig, service, {
        "query": "[tokens=40]", "streaming": True}))
    metadata, *deltas, final = frames
    assert metadata == {"id": metadata["id"], "complete": False, "response": {
        "message_type": "metadata", "sources": wire_sources(service), "optimized_query": None,
        "subqueries": [], "end_of_stream": False}}
    assert deltas and all(not frame["complete"] for frame in deltas)
    assert all(set(frame["response"]) == {"message_type", "chunk", "end_of_stream"}
               and frame["response"]["message_type"] == "chunk" for frame in deltas)
    assert "".join(frame["response"]["chunk"] for frame in deltas) == expected_text(40)
    assert final["complete"] and final["response"] == {
        "message_type": "chunk", "chunk": "", "end_of_stream": True, "end_of_session": True,
        "sources": wire_sources(service), "in_token": PROMPT_TOKENS, "out_token": 40,
        "model": MODEL}


async def test_a_fast_long_stream_keeps_metadata_whole_and_first(rig, frames_of):
    # 3000 deltas sent as fast as the service can: when the reader falls behind, the
    # waiting deltas are merged; the metadata record never is.
    frames = await frames_of(rag_frame(rig, "document-rag", {
        "query": "[tokens=3000]", "streaming": True}))
    assert frames[0]["response"]["message_type"] == "metadata"
    assert frames[0]["response"]["sources"] == wire_sources("document-rag")
    assert "chunk" not in frames[0]["response"]
    text = "".join(frame["response"].get("chunk", "") for frame in frames[1:])
    assert text == expected_text(3000)
    assert [frame["complete"] for frame in frames].count(True) == 1


async def test_rewritten_question_subqueries_limits_and_tenant_reach_the_service(rig, frames_of):
    frames = await frames_of(rag_frame(rig, "graph-rag", {
        "query": "why?", "streaming": True, "optimize-query": True, "subqueries": True,
        "entity-limit": 7, "triple_limit": 9, "max-subgraph-size": 11,
        "max-path-length": 3, "collection": "papers"}, user="alice"))
    metadata = frames[0]["response"]
    assert metadata["optimized_query"] == "rewritten: why?"
    assert metadata["subqueries"] == ["why? (part 1)", "why? (part 2)"]
    assert metadata["sources"] == wire_sources("graph-rag", "alice", "papers")
    request = rig.rag.requests[-1]
    assert (request.entity_limit, request.triple_limit, request.max_subgraph_size,
            request.max_path_length) == (7, 9, 11, 3)
    assert (request.user, request.collection) == ("alice", "papers")


async def test_non_streaming_is_one_frame_with_the_whole_answer(rig, frames_of):
    [frame] = await frames_of(rag_frame(rig, "document-rag", {
        "query": "[tokens=6]", "doc-limit": 3}))
    assert frame["complete"] and frame["response"] == {
        "response": expected_text(6), "end_of_stream": True, "end_of_session": True,
        "sources": wire_sources("document-rag"), "subqueries": [], "in_token": PROMPT_TOKENS,
        "out_token": 6, "model": MODEL}
    assert rig.rag.requests[-1].doc_limit == 3


async def test_a_final_record_repeating_the_answer_is_not_repeated_on_the_wire(rig, frames_of):
    frames = await frames_of(rag_frame(rig, "graph-rag", {
        "query": "[tokens=5 repeat=1]", "streaming": True}))
    assert "response" not in frames[-1]["response"]
    joined = "".join(frame["response"].get("chunk", "") + frame["response"].get("response", "")
                     for frame in frames)
    assert joined == expected_text(5)


async def test_service_error_mid_stream_is_the_last_frame(rig, frames_of):
    frames = await frames_of(rag_frame(rig, "graph-rag", {
        "query": "[tokens=10 fail_after=4]", "streaming": True}))
    assert "".join(frame["response"].get("chunk", "") for frame in frames[:-1]) == \
        expected_text(4)
    assert frames[-1]["complete"] and frames[-1]["response"]["error"] == {
        "type": "graph-rag-error", "message": "scripted failure"}


async def test_bad_rag_requests_name_the_field(rig, frames_of):
    [missing] = await frames_of(rag_frame(rig, "graph-rag", {"streaming": True}))
    assert missing["error"]["type"] == "bad-request"
    assert missing["error"]["message"].startswith("request.query")
    [too_big] = await frames_of(rag_frame(rig, "document-rag", {
        "query": "q", "doc-limit": 0}))
    assert too_big["error"]["message"].startswith("request.doc-limit")  # as it was sent


# --- REST on the service path --------------------------------------------------------

def service_url(rig: ScriptedRagGateway, kind: str) -> str:
    return f"{rig.url}api/v1/flow/{rig.flow}/service/{kind}"


async def test_rest_json_ndjson_and_sse(rig, http):
    async with http.post(service_url(rig, "document-rag"), json={"query": "[tokens=4]"}
                         ) as response:
        assert response.status == 200
        assert (await response.json())["response"] == expected_text(4)

    async with http.post(service_url(rig, "graph-rag"), json={
            "query": "[tokens=30]", "streaming": True}) as response:
        assert response.content_type == "application/x-ndjson"
        records = [json.loads(line) async for line in response.content if line.strip()]
    assert records[0]["message_type"] == "metadata" and records[0]["optimized_query"] is None
    assert "".join(record.get("chunk", "") for record in records) == expected_text(30)
    assert [record["end_of_stream"] for record in records].count(True) == 1
    assert records[-1]["chunk"] == "" and records[-1]["sources"] == wire_sources("graph-rag")

    async with http.post(service_url(rig, "document-rag"), json={"query": "[tokens=8]"},
                         headers={"Accept": "text/event-stream"}) as response:
        assert response.content_type == "text/event-stream"
        events = [json.loads(block.removeprefix("data: "))
                  for block in (await response.text()).split("\n\n") if block]
    assert events[0]["message_type"] == "metadata"  # Accept turned streaming on
    assert "".join(event.get("chunk", "") for event in events) == expected_text(8)


async def test_rest_service_failure_is_502_or_the_last_line(rig, http):
    async with http.post(service_url(rig, "graph-rag"), json={
            "query": "[tokens=5 fail_after=2]"}) as response:
        assert response.status == 502
        assert await response.json() == {
            "error": {"type": "graph-rag-error", "message": "scripted failure"},
            "end_of_stream": True, "end_of_session": True}
    async with http.post(service_url(rig, "graph-rag"), json={
            "query": "[tokens=5 fail_after=2]", "streaming": True}) as response:
        records = [json.loads(line) async for line in response.content if line.strip()]
    assert "".join(record.get("chunk", "") for record in records) == expected_text(2)
    assert records[-1]["error"]["type"] == "graph-rag-error"


# --- the answer-stream API -----------------------------------------------------------

async def query_lines(http, url: str, body: dict) -> list[dict]:
    async with http.post(url, json=body) as response:
        assert response.status == 200, await response.text()
        assert response.content_type == "application/x-ndjson"
        return [json.loads(line) async for line in response.content if line.strip()]


@pytest.mark.parametrize("path", ["api/v1/query", "query"])
async def test_query_streams_metadata_content_and_done(rig, http, path):
    lines = await query_lines(http, rig.url + path, {
        "query": "[tokens=25]", "stream": True, "flow": rig.flow, "collection": "papers",
        "user": "bob"})
    metadata, *content, done = lines
    assert metadata == {"type": "metadata",
                        "sources": wire_sources("document-rag", "bob", "papers"),
                        "optimized_query": None, "subqueries": [],
                        "request_id": metadata["request_id"]}
    assert metadata["request_id"] == rig.rag.ids[-1]  # the id in the service's logs
    assert content and all(set(line) == {"type", "delta"} and line["type"] == "content"
                           for line in content)
    assert "".join(line["delta"] for line in content) == expected_text(25)
    assert done == {"type": "done", "usage": {"in_token": PROMPT_TOKENS, "out_token": 25,
                                              "model": MODEL}}


async def test_query_graph_mode_with_rewriting_and_limits(rig, http):
    lines = await query_lines(http, rig.url + "api/v1/query", {
        "query": "who?", "stream": True, "mode": "graph", "flow": rig.flow,
        "optimize_query": True, "subqueries": True, "entity_limit": 4, "max-path-length": 1})
    assert lines[0]["sources"] == wire_sources("graph-rag")
    assert lines[0]["optimized_query"] == "rewritten: who?"
    assert lines[0]["subqueries"] == ["who? (part 1)", "who? (part 2)"]
    request = rig.rag.requests[-1]
    assert (request.entity_limit, request.max_path_length, request.streaming) == (4, 1, True)


async def test_query_passes_the_sampling_options_to_the_service(rig, http):
    await query_lines(http, rig.url + "api/v1/query", {
        "query": "who?", "stream": True, "flow": rig.flow, "max_tokens": 40,
        "temperature": 0.2, "stop": ["\n\n"]})
    request = rig.rag.requests[-1]
    assert (request.max_tokens, request.temperature, request.stop) == (40, 0.2, ["\n\n"])


async def test_query_without_stream_is_one_object(rig, http):
    async with http.post(rig.url + "query", json={
            "query": "[tokens=9]", "stream": False, "mode": "graph", "flow": rig.flow,
            "subqueries": True}) as response:
        assert response.status == 200 and response.content_type == "application/json"
        body = await response.json()
    assert body == {"response": expected_text(9), "sources": wire_sources("graph-rag"),
                    "optimized_query": None,
                    "subqueries": ["[tokens=9] (part 1)", "[tokens=9] (part 2)"],
                    "request_id": rig.rag.ids[-1],
                    "usage": {"in_token": PROMPT_TOKENS, "out_token": 9, "model": MODEL}}


async def test_query_failure_mid_answer_ends_with_an_error_line(rig, http):
    lines = await query_lines(http, rig.url + "api/v1/query", {
        "query": "[tokens=10 fail_after=3]", "stream": True, "mode": "graph",
        "flow": rig.flow})
    assert lines[0]["type"] == "metadata"
    assert "".join(line.get("delta", "") for line in lines[1:-1]) == expected_text(3)
    assert lines[-1] == {"type": "error", "message": "scripted failure",
                         "error_type": "graph-rag-error"}
    assert not any(line["type"] == "done" for line in lines)


async def test_query_failure_without_stream_is_502(rig, http):
    async with http.post(rig.url + "api/v1/query", json={
            "query": "[tokens=10 fail_after=3]", "flow": rig.flow}) as response:
        assert response.status == 502
        assert (await response.json())["error"] == {"type": "document-rag-error",
                                                    "message": "scripted failure"}


@pytest.mark.parametrize("body, status, error_type, named", [
    (b"{not json", 400, "bad-request", "not valid JSON"),
    (b'["query"]', 400, "bad-request", "JSON object"),
    ({"stream": True}, 400, "bad-request", "query: Field required"),
    ({"query": ""}, 400, "bad-request", "query:"),
    ({"query": "q", "stream": "often"}, 400, "bad-request", "stream:"),
    ({"query": "q", "mode": "vibes"}, 400, "bad-request", "mode:"),
    ({"query": "q", "mode": "graph", "doc_limit": 5}, 400, "bad-request", "doc_limit:"),
    ({"query": "q", "mode": "graph", "entity_limit": 0}, 400, "bad-request", "entity_limit:"),
    ({"query": "q", "mode": "document", "triple-limit": 3}, 400, "bad-request",
     "triple_limit:"),
    ({"query": "q", "collection": 7}, 400, "bad-request", "collection:"),
    ({"query": "q", "mode": "lazy"}, 404, "disabled", "LAZY_RAG_ENABLED=true"),
    ({"query": "q", "flow": "elsewhere"}, 404, "unknown-flow", "elsewhere"),
])
async def test_query_bad_input(rig, http, body, status, error_type, named):
    if isinstance(body, dict):
        body = json.dumps({"flow": rig.flow, **body}).encode()
    async with http.post(rig.url + "api/v1/query", data=body,
                         headers={"Content-Type": "application/json"}) as response:
        assert response.status == status
        error = (await response.json())["error"]
    assert error["type"] == error_type and named in error["message"], error
    assert "Traceback" not in error["message"]


async def test_dropped_query_stream_cancels_the_answer(rig, http):
    query = f"[tokens=5000 delay=0.01] {uuid.uuid4().hex}"
    response = await http.post(rig.url + "api/v1/query", json={
        "query": query, "stream": True, "flow": rig.flow})
    assert json.loads(await response.content.readline())["type"] == "metadata"
    assert json.loads(await response.content.readline())["type"] == "content"
    response.close()  # drops the connection mid-answer
    await rig.rag.wait_cancelled(query, 2.0)


async def test_dropped_service_stream_cancels_the_answer(rig, http):
    query = f"[tokens=5000 delay=0.01] {uuid.uuid4().hex}"
    response = await http.post(service_url(rig, "graph-rag"), json={
        "query": query, "streaming": True})
    assert json.loads(await response.content.readline())["message_type"] == "metadata"
    response.close()
    await rig.rag.wait_cancelled(query, 2.0)


async def test_openapi_describes_the_rag_services_and_the_query_api(rig, http):
    async with http.get(rig.url + "api/v1/openapi.json") as response:
        spec = await response.json()
    paths = spec["paths"]
    for kind in ("graph-rag", "document-rag"):
        assert f"/api/v1/flow/{{flow}}/service/{kind}" in paths
    for path in ("/api/v1/query", "/query"):
        operation = paths[path]["post"]
        assert operation["requestBody"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/QueryRequest"}
        assert "application/x-ndjson" in operation["responses"]["200"]["content"]
    request = spec["components"]["schemas"]["QueryRequest"]
    assert request["required"] == ["query"]
    assert request["properties"]["mode"]["enum"] == ["document", "graph", "lazy", "agent"]
    assert {"ContentLine", "MetadataLine", "DoneLine", "ErrorLine"} <= set(
        spec["components"]["schemas"])
