"""The gateway's LazyRAG parts that need no broker: its rows (turned off, absent, the
wire), the answer-stream API in mode lazy, the models the OpenAPI document shows
held to the records, the status's settings from the environment, and the metrics."""
import asyncio
import json

import pytest
from prometheus_client import REGISTRY

from tests.support.answer_lines import lines_of
from trustgraph.base import ServiceError
from trustgraph.gateway.apis.lazy_rag import (
    EXPAND_FIELDS,
    HOW,
    STATUS_FIELDS,
    LazyAnswer,
    LazyExpansion,
    LazyRagEndpoint,
    LazyStatus,
    answered,
)
from trustgraph.gateway.apis.lazy_rag import SERVICES as LAZY_RAG_SERVICES
from trustgraph.gateway.apis.lines import collected_model, done_model
from trustgraph.gateway.apis.query import parse
from trustgraph.gateway.app import GatewaySettings
from trustgraph.gateway.core.caller import OPEN
from trustgraph.gateway.core.dispatch import Dispatcher, wired
from trustgraph.gateway.core.errors import GatewayError
from trustgraph.gateway.core.services import SERVICES
from trustgraph.schema import (
    Error,
    LazyCommunity,
    LazyEntity,
    LazyRagResponse,
    LazyRagStatusRequest,
    LazyRelationship,
    Source,
    Term,
    encode,
)
from trustgraph.schema.lazy_rag import LazyRagOptions


def dispatcher(on: bool) -> Dispatcher:
    """A gateway's client as the LazyRAG API leaves it (no bus: nothing is sent)."""
    client = Dispatcher(bus=None, flows=["default"], timeout=1)
    client.optional(LAZY_RAG_SERVICES, HOW, on=on)
    return client


ON, OFF = dispatcher(True), dispatcher(False)
SOURCE = Source(id="u/c/d1/c0", document_id="d1", title="One", text="one", distance=0.25)
ENTITY = LazyEntity(id="http://ex/a", label="a", hops=0, score=0.9, community="c0")
RELATIONSHIP = LazyRelationship(s=Term(t="i", i="http://ex/a"), p=Term(t="i", i="http://ex/k"),
                                o=Term(t="i", i="http://ex/b"), text="a — k — b")
COMMUNITY = LazyCommunity(id="c0", size=2, members=["a", "b"], relations=["a — k — b"])
LAZY = {"entities": [ENTITY], "relationships": [RELATIONSHIP], "communities": [COMMUNITY],
        "confidence": 0.5, "missing_info": ["when"], "generation_time_ms": 3.0,
        "community_cache": "hit"}


def wire(value: dict) -> dict:
    """Lazy fields as the wire has them (plain JSON)."""
    record = json.loads(encode(LazyRagResponse(**value)))
    return {key: record[key] for key in value}


def final(**fields) -> tuple[bytes, bool]:
    return encode(LazyRagResponse(message_type="chunk", chunk="", end_of_stream=True,
                                  end_of_session=True, sources=[SOURCE], in_token=5,
                                  out_token=2, model="m", **LAZY, **fields)), True


# --- turned off, or absent ------------------------------------------------------------

@pytest.mark.parametrize("service", LAZY_RAG_SERVICES)
def test_a_service_turned_off_is_a_404_saying_how_to_enable_it(service):
    with pytest.raises(GatewayError) as failure:
        OFF.resolve(service, "default")
    assert (failure.value.status, failure.value.type) == (404, "disabled")
    assert "LAZY_RAG_ENABLED=true" in failure.value.message
    assert "tg-run lazy-rag" in failure.value.message
    assert ON.resolve(service, "default").name == service
    assert OFF.resolve("graph-rag", "default").name == "graph-rag"


class Failing:
    """A requester whose every answer is the error ``type`` (as the bus requester's
    is when no processor takes the request, or it is full)."""

    def __init__(self, type: str) -> None:
        self.type = type

    async def frames(self, record, request_id):
        raise ServiceError(Error(type=self.type, message=f"{self.type} happened"))
        yield  # an async generator that fails at once


async def answer_of(client: Dispatcher, service: str, requester: Failing) -> None:
    started = asyncio.get_running_loop().create_future()
    started.set_result(requester)
    client._requesters[(service, "default")] = started
    record = LazyRagStatusRequest()
    async for _ in client.frames(SERVICES[service], "default", record, caller=OPEN):
        pass


@pytest.mark.parametrize("service", LAZY_RAG_SERVICES)
async def test_no_lazy_rag_processor_is_the_same_404(service):
    with pytest.raises(GatewayError) as failure:
        await answer_of(dispatcher(True), service, Failing("no-service"))
    assert (failure.value.status, failure.value.type) == (404, "disabled")
    assert failure.value.message.startswith("no-service happened; to enable it")


async def test_other_failures_of_lazy_rag_and_no_service_elsewhere_pass_through():
    with pytest.raises(ServiceError):
        await answer_of(dispatcher(True), "lazy-rag", Failing("overloaded"))
    with pytest.raises(ServiceError):  # graph-rag is not optional: no-service stays 503
        await answer_of(dispatcher(True), "graph-rag", Failing("no-service"))


# --- the answer-stream API in mode lazy -------------------------------------------------

def test_lazy_mode_asks_lazy_rag_with_its_options():
    query, row, record = parse(ON, {"query": "why?", "mode": "lazy", "max-hops": 3,
                                    "max_entities": 7, "use_communities": False,
                                    "collection": "c"})
    assert row.name == "lazy-rag"
    assert (record.query, record.max_hops, record.max_entities, record.use_communities,
            record.collection, record.streaming) == ("why?", 3, 7, False, "c", True)


@pytest.mark.parametrize("body, starts", [
    ({"mode": "lazy", "entity_limit": 3}, "entity_limit: not a parameter of mode 'lazy'"),
    ({"mode": "lazy", "optimize_query": True}, "optimize_query: not a parameter"),
    ({"mode": "graph", "max_hops": 2}, "max_hops: not a parameter of mode 'graph'"),
    ({"mode": "document", "use_communities": False}, "use_communities: not a parameter"),
    ({"mode": "lazy", "max_hops": 6}, "max_hops: Input should be less than or equal to 5"),
    ({"mode": "lazy", "max_entities": 201}, "max_entities: Input should be less than or "
                                            "equal to 200"),
    ({"mode": "lazy", "query": "q" * 10_001}, "query: String should have at most 10000"),
])
def test_lazy_mode_refusals_name_the_field(body, starts):
    with pytest.raises(GatewayError) as failure:
        parse(ON, {"query": "q", **body})
    assert failure.value.status == 400 and failure.value.message.startswith(starts)


async def test_lazy_done_line_and_collected_answer_carry_the_lazy_fields():
    lines, out = await lines_of(LazyRagResponse, final())
    done = out[-1]
    assert done == {"type": "done", "usage": {"in_token": 5, "out_token": 2, "model": "m"},
                    **wire(LAZY), "summary_error": None}
    done_model(LazyRagResponse).model_validate(done)
    collected = collected_model(LazyRagResponse).model_validate(lines.collected())
    assert collected.confidence == 0.5 and collected.missing_info == ["when"]


async def test_a_summary_error_reaches_the_done_line():
    _, out = await lines_of(LazyRagResponse,
                            final(summary_error=Error(type="llm-error", message="down")))
    done = out[-1]
    assert done["summary_error"] == {"type": "llm-error", "message": "down"}
    assert done["entities"] == wire(LAZY)["entities"]


async def test_graph_and_document_done_lines_stay_as_they_were():
    _, out = await lines_of(SERVICES["graph-rag"].response_model, final())
    done = out[-1]
    assert set(done) == {"type", "usage"}


# --- the documented models are the records' fields -------------------------------------

def test_documented_models_hold_the_records_fields():
    assert tuple(LazyAnswer.model_fields) == ("query", "summary", "sources", "usage",
                                               *LazyRagResponse.result_fields)
    assert tuple(LazyExpansion.model_fields) == ("query", *EXPAND_FIELDS)
    assert tuple(LazyStatus.model_fields) == (*STATUS_FIELDS, "message")


def test_the_lazy_row_normalises_metadata_and_keeps_the_final_record():
    row = SERVICES["lazy-rag"]
    metadata = encode(LazyRagResponse(message_type="metadata", sources=[SOURCE])), False
    batch = wired(row, [metadata, final()], first=True)
    assert json.loads(batch[0][0]) == {"message_type": "metadata",
                                       "sources": [SOURCE.model_dump(exclude_none=True)],
                                       "optimized_query": None, "subqueries": [],
                                       "end_of_stream": False}
    assert batch[1] == final()


# --- status settings from the environment ------------------------------------------------

def test_unserved_status_reports_the_lazy_rag_environment(monkeypatch):
    monkeypatch.setenv("LAZY_RAG_MAX_HOPS", "4")
    monkeypatch.setenv("LAZY_RAG_USE_COMMUNITIES", "false")
    monkeypatch.setenv("LAZY_RAG_SUMMARY_MODEL", "small-model")
    status = LazyRagEndpoint(OFF, LazyRagOptions.model_validate(
        GatewaySettings(), from_attributes=True))._unserved("off here")
    LazyStatus.model_validate(status)
    assert status == {"enabled": False, "max_hops": 4, "max_entities": 50,
                      "use_communities": False, "summary_model": "small-model",
                      "community_cache": [],
                      "message": f"off here; {HOW}"}


# --- metrics ------------------------------------------------------------------------------

def sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


@pytest.mark.parametrize("cache, hits, misses", [("hit", 1, 0), ("miss", 0, 1), (None, 0, 0)])
def test_each_answer_is_timed_and_its_community_cache_use_counted(cache, hits, misses):
    before = [sample(name) for name in ("lazy_rag_query_duration_seconds_count",
                                        "lazy_rag_community_cache_hits_total",
                                        "lazy_rag_community_cache_misses_total")]
    record = {"end_of_stream": True} if cache is None else {"end_of_stream": True,
                                                            "community_cache": cache}
    answered(0.2, json.dumps(record).encode())
    after = [sample(name) for name in ("lazy_rag_query_duration_seconds_count",
                                       "lazy_rag_community_cache_hits_total",
                                       "lazy_rag_community_cache_misses_total")]
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, hits, misses]
