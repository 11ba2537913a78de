"""The gateway's LazyRAG interfaces: the ``lazy-rag``, ``lazy-rag-expand`` and
``lazy-rag-status`` rows (websocket and REST), ``/api/v1/lazy-rag/{query,expand,
status}`` in the seed's envelope, ``/api/v1/query`` in mode lazy, LAZY_RAG_ENABLED
off, the metrics and the OpenAPI document; on a real broker in front of scripted
LazyRAG services (tests/support/scripted_lazy_rag.py). One stack serves the module: a
gateway with LazyRAG on and one with it off, on a flow of their own.
"""
import json
import uuid
from datetime import datetime

import aiohttp
import pytest
import pytest_asyncio

from tests.support.scripted_lazy_rag import (
    MODEL,
    PROMPT_TOKENS,
    STATUS,
    SUMMARY_ERROR,
    expected_text,
    scripted_lazy_rag_stack,
    wire_subgraph,
)
from tests.support.scripted_rag import ScriptedRagGateway, wire_sources
from trustgraph.gateway.apis.lazy_rag import (
    LazyAnswerEnvelope,
    LazyExpandEnvelope,
    LazyStatusEnvelope,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEADLINE = 30.0
USAGE = {"in_token": PROMPT_TOKENS, "model": MODEL}
HOW = "LAZY_RAG_ENABLED=true"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rig(broker):
    async with scripted_lazy_rag_stack(broker.url) as stack:
        yield stack


def frame(rig: ScriptedRagGateway, service: str, request: dict) -> dict:
    return {"id": uuid.uuid4().hex, "service": service, "flow": rig.flow, "request": request}


def lazy_url(base: str, operation: str) -> str:
    return f"{base}api/v1/lazy-rag/{operation}"


async def post(http, url: str, body: dict) -> tuple[int, dict]:
    async with http.post(url, json=body) as response:
        return response.status, await response.json()


async def ndjson(http, url: str, body: dict) -> list[dict]:
    async with http.post(url, json=body) as response:
        assert response.status == 200, await response.text()
        assert response.content_type == "application/x-ndjson"
        return [json.loads(line) async for line in response.content if line.strip()]


def on_the_bus(fields: dict) -> dict:
    """Fields as a bus record carries them: unset ones left out."""
    return {key: value for key, value in fields.items() if value is not None}


def check_meta(meta: dict, request_id: str) -> None:
    assert set(meta) == {"requestId", "timestamp"} and meta["requestId"] == request_id
    assert datetime.fromisoformat(meta["timestamp"]).utcoffset().total_seconds() == 0


# --- the websocket rows ------------------------------------------------------------------

async def test_streaming_frames_are_rag_frames_with_the_lazy_fields_last(rig, frames_of):
    frames = await frames_of(frame(rig, "lazy-rag", {
        "query": "[tokens=20]", "streaming": True, "max-hops": 1, "max_entities": 2}))
    metadata, *deltas, final = frames
    assert metadata["response"] == {"message_type": "metadata",
                                    "sources": wire_sources("lazy-rag"),
                                    "optimized_query": None, "subqueries": [],
                                    "end_of_stream": False}
    assert "".join(f["response"]["chunk"] for f in deltas) == expected_text(20)
    assert final["complete"] and final["response"] == {
        "message_type": "chunk", "chunk": "", "end_of_stream": True, "end_of_session": True,
        "sources": wire_sources("lazy-rag"), "out_token": 20, **USAGE,
        **on_the_bus(wire_subgraph({"query": "[tokens=20]", "max_hops": 1,
                                    "max_entities": 2}))}


async def test_non_streaming_is_one_frame_and_expand_and_status_answer_once(rig, frames_of):
    [answer] = await frames_of(frame(rig, "lazy-rag", {"query": "[tokens=3]"}))
    assert answer["response"]["response"] == expected_text(3)
    assert answer["response"]["confidence"] == wire_subgraph({"query": "q"})["confidence"]
    [expanded] = await frames_of(frame(rig, "lazy-rag-expand", {
        "query": "q", "use_communities": False}))
    assert expanded["response"] == {"end_of_stream": True, **on_the_bus(wire_subgraph(
        {"query": "q", "use_communities": False}))}
    [status] = await frames_of(frame(rig, "lazy-rag-status", {"collection": "c"}))
    assert status["response"]["community_cache"][0]["collection"] == "c"


# --- POST /api/v1/lazy-rag/query ----------------------------------------------------------

async def test_query_answers_one_result_in_the_envelope(rig, http):
    body = {"query": "[tokens=6]", "flow": rig.flow, "user": "ann", "collection": "notes",
            "max_hops": 3, "max-entities": 2, "use_communities": False}
    status, answer = await post(http, lazy_url(rig.url, "query"), body)
    assert status == 200 and set(answer) == {"data", "meta"}
    LazyAnswerEnvelope.model_validate(answer)  # the shape the OpenAPI document shows
    check_meta(answer["meta"], rig.rag.ids[-1])
    assert answer["data"] == {
        "query": "[tokens=6]", "summary": expected_text(6),
        **wire_subgraph(body), "summary_error": None,
        "sources": wire_sources("lazy-rag", "ann", "notes"),
        "usage": {"out_token": 6, **USAGE}}
    request = rig.rag.requests[-1]
    assert (request.user, request.collection, request.max_hops, request.max_entities,
            request.use_communities, request.streaming) == ("ann", "notes", 3, 2, False, True)


async def test_query_streams_the_answer_stream_lines(rig, http):
    lines = await ndjson(http, lazy_url(rig.url, "query"), {
        "query": "[tokens=15]", "stream": True, "flow": rig.flow})
    metadata, *content, done = lines
    assert metadata == {"type": "metadata", "sources": wire_sources("lazy-rag"),
                        "optimized_query": None, "subqueries": [],
                        "request_id": rig.rag.ids[-1]}
    assert "".join(line["delta"] for line in content) == expected_text(15)
    assert done == {"type": "done", "usage": {"out_token": 15, **USAGE},
                    **wire_subgraph({"query": "[tokens=15]"}), "summary_error": None}


async def test_an_llm_failure_still_answers_the_subgraph_with_the_error(rig, http):
    query = "[summary_fail=1]"
    status, answer = await post(http, lazy_url(rig.url, "query"), {
        "query": query, "flow": rig.flow})
    assert status == 200 and LazyAnswerEnvelope.model_validate(answer)
    assert answer["data"]["summary"] is None
    assert answer["data"]["summary_error"] == SUMMARY_ERROR.model_dump()
    assert {key: answer["data"][key] for key in wire_subgraph({"query": query})} == \
        wire_subgraph({"query": query})
    lines = await ndjson(http, lazy_url(rig.url, "query"), {
        "query": query, "stream": True, "flow": rig.flow})
    assert [line["type"] for line in lines] == ["metadata", "done"]
    assert lines[-1]["summary_error"] == SUMMARY_ERROR.model_dump()
    assert lines[-1]["missing_info"] == wire_subgraph({"query": query})["missing_info"]


async def test_a_service_failure_is_502_or_the_last_line(rig, http):
    status, answer = await post(http, lazy_url(rig.url, "query"), {
        "query": "[tokens=5 fail_after=2]", "flow": rig.flow})
    assert status == 502 and answer == {"error": {"type": "lazy-rag-error",
                                                  "message": "scripted failure"}}
    lines = await ndjson(http, lazy_url(rig.url, "query"), {
        "query": "[tokens=5 fail_after=2]", "stream": True, "flow": rig.flow})
    assert lines[-1] == {"type": "error", "message": "scripted failure",
                         "error_type": "lazy-rag-error"}


@pytest.mark.parametrize("operation", ["query", "expand"])
@pytest.mark.parametrize("fields, named", [
    ({"query": None}, "query: Field required"),
    ({"query": ""}, "query: String should have at least 1 character"),
    ({"query": "q" * 10_001}, "query: String should have at most 10000 characters"),
    ({"max_hops": 0}, "max_hops: Input should be greater than or equal to 1"),
    ({"max_hops": 6}, "max_hops: Input should be less than or equal to 5"),
    ({"max-hops": 6}, "max-hops: Input should be less than or equal to 5"),
    ({"max_entities": 0}, "max_entities: Input should be greater than or equal to 1"),
    ({"max_entities": 201}, "max_entities: Input should be less than or equal to 200"),
    ({"use_communities": "sometimes"}, "use_communities: Input should be a valid boolean"),
])
async def test_bad_requests_are_400s_naming_the_field(rig, http, operation, fields, named):
    body = {key: value for key, value in {"query": "q", "flow": rig.flow, **fields}.items()
            if value is not None}
    status, answer = await post(http, lazy_url(rig.url, operation), body)
    assert status == 400 and answer["error"]["type"] == "bad-request"
    assert answer["error"]["message"].startswith(named), answer


# --- POST /api/v1/lazy-rag/expand, GET /api/v1/lazy-rag/status -----------------------------

async def test_expand_answers_the_subgraph_in_the_envelope_without_an_answer(rig, http):
    body = {"query": "who?", "flow": rig.flow, "collection": "c9", "max_entities": 1}
    status, answer = await post(http, lazy_url(rig.url, "expand"), body)
    assert status == 200
    assert answer["data"] == {"query": "who?", **wire_subgraph(body)}
    LazyExpandEnvelope.model_validate(answer)
    check_meta(answer["meta"], rig.rag.ids[-1])
    assert rig.rag.requests[-1].collection == "c9"


async def test_status_answers_the_services_settings_and_cache(rig, http):
    async with http.get(lazy_url(rig.url, "status"), params={
            "flow": rig.flow, "user": "ann", "collection": "notes"}) as response:
        assert response.status == 200
        answer = await response.json()
    assert answer["data"] == {"enabled": True, **STATUS, "message": None, "community_cache": [
        {"collection": "notes", "graph_version": 4, "cached_version": 4, "fresh": True,
         "computing": False, "communities": 1, "levels": 1, "entities": 3}]}
    LazyStatusEnvelope.model_validate(answer)
    assert (rig.rag.requests[-1].user, rig.rag.requests[-1].collection) == ("ann", "notes")


# --- /api/v1/query, mode lazy ----------------------------------------------------------------

async def test_the_answer_stream_api_answers_in_mode_lazy(rig, http):
    lines = await ndjson(http, rig.url + "api/v1/query", {
        "query": "[tokens=4]", "mode": "lazy", "stream": True, "flow": rig.flow,
        "max_hops": 1})
    # tokens that arrive together are one delta: one or more content lines
    assert [line["type"] for line in lines] == \
        ["metadata"] + ["content"] * (len(lines) - 2) + ["done"]
    assert "".join(line["delta"] for line in lines[1:-1]) == expected_text(4)
    assert lines[-1]["confidence"] == wire_subgraph({"query": "q"})["confidence"]
    assert rig.rag.requests[-1].max_hops == 1
    status, collected = await post(http, rig.url + "query", {
        "query": "[tokens=2]", "mode": "lazy", "flow": rig.flow})
    assert status == 200 and collected["response"] == expected_text(2)
    assert collected["missing_info"] == wire_subgraph({"query": "[tokens=2]"})["missing_info"]
    assert collected["request_id"] == rig.rag.ids[-1]


# --- turned off --------------------------------------------------------------------------------

@pytest.mark.parametrize("path, body", [
    ("api/v1/lazy-rag/query", {"query": "q"}),
    ("api/v1/lazy-rag/expand", {"query": "q"}),
    ("api/v1/lazy-rag/query", {"query": "q", "max_hops": 99}),  # off comes first
    ("api/v1/query", {"query": "q", "mode": "lazy"}),
])
async def test_turned_off_the_lazy_endpoints_are_404s_saying_how_to_enable(rig, http, path,
                                                                          body):
    status, answer = await post(http, rig.off_url + path, {**body, "flow": rig.flow})
    assert status == 404 and answer["error"]["type"] == "disabled"
    assert HOW in answer["error"]["message"]


async def test_turned_off_the_websocket_refuses_lazy_rag_too(rig):
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(rig.off_url + "api/v1/socket") as ws:
            await ws.send_json(frame(rig, "lazy-rag", {"query": "q"}))
            answer = await ws.receive_json(timeout=DEADLINE)
    assert answer["complete"] and answer["error"]["type"] == "disabled"
    assert HOW in answer["error"]["message"]


async def test_turned_off_status_still_answers_with_the_settings_in_force(rig, http):
    async with http.get(lazy_url(rig.off_url, "status")) as response:
        assert response.status == 200
        answer = await response.json()
    data = answer["data"]
    assert data["enabled"] is False and data["community_cache"] == []
    assert (data["max_hops"], data["max_entities"], data["use_communities"]) == (2, 50, True)
    assert HOW in data["message"] and "LAZY_RAG_ENABLED=false" in data["message"]
    LazyStatusEnvelope.model_validate(answer)


# --- metrics and the OpenAPI document ------------------------------------------------------------

def metric(text: str, name: str) -> float:
    values = [float(line.split()[-1]) for line in text.splitlines()
              if line.startswith(name + " ")]
    assert values, f"{name} not on /metrics"
    return values[0]


async def test_metrics_time_each_answer_and_count_its_community_cache_use(rig, http,
                                                                       frames_of):
    names = ("lazy_rag_query_duration_seconds_count", "lazy_rag_community_cache_hits_total",
             "lazy_rag_community_cache_misses_total")

    async def scraped() -> list[float]:
        async with http.get(rig.url + "metrics") as response:
            text = await response.text()
        return [metric(text, name) for name in names]

    before = await scraped()
    await post(http, lazy_url(rig.url, "query"), {"query": "[tokens=2]", "flow": rig.flow})
    await frames_of(frame(rig, "lazy-rag", {"query": "[tokens=2 cache_miss=1]",
                                            "streaming": True}))
    await frames_of(frame(rig, "lazy-rag", {"query": "q", "use_communities": False}))
    after = await scraped()
    assert [a - b for a, b in zip(after, before, strict=True)] == [3, 1, 1]


async def test_openapi_describes_the_lazy_endpoints(rig, http):
    async with http.get(rig.url + "api/v1/openapi.json") as response:
        spec = await response.json()
    paths, schemas = spec["paths"], spec["components"]["schemas"]
    query = paths["/api/v1/lazy-rag/query"]["post"]
    assert query["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/LazyQueryBody"}
    assert query["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/LazyAnswerEnvelope"}
    assert {"400", "404"} <= set(query["responses"])
    assert "LazyExpandEnvelope" in json.dumps(paths["/api/v1/lazy-rag/expand"])
    assert "LazyStatusEnvelope" in json.dumps(paths["/api/v1/lazy-rag/status"])
    body = schemas["LazyQueryBody"]["properties"]
    assert (body["max_hops"]["anyOf"][0]["maximum"], body["max_entities"]["anyOf"][0]["maximum"],
            body["query"]["maxLength"]) == (5, 200, 10_000)
    assert set(schemas["Meta"]["required"]) == {"requestId", "timestamp"}
    for kind in ("lazy-rag", "lazy-rag-expand", "lazy-rag-status"):
        assert f"/api/v1/flow/{{flow}}/service/{kind}" in paths
