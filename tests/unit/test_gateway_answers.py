"""The gateway's RAG parts that need no broker: the RAG rows' framing (coalescing,
the protocol's exact first and final records) and the answer-stream API's request
parsing and record-to-line translation."""
import json

import pytest

from tests.support.answer_lines import AnswerLines
from tests.support.answer_lines import lines_of as read_lines
from trustgraph.base import ServiceError
from trustgraph.gateway.apis.lazy_rag import HOW
from trustgraph.gateway.apis.lazy_rag import SERVICES as LAZY_RAG_SERVICES
from trustgraph.gateway.apis.lines import (
    CollectedAnswer,
    ContentLine,
    DoneLine,
    ErrorLine,
    MetadataLine,
)
from trustgraph.gateway.apis.query import error_line, parse
from trustgraph.gateway.core.dispatch import Dispatcher, wired
from trustgraph.gateway.core.errors import GatewayError
from trustgraph.gateway.core.services import SERVICES
from trustgraph.schema import Error, RagResponse, Source, Term, encode

SOURCE = Source(id="u/c/d1/c0", document_id="d1", title="One", text="one", distance=0.25)
TRIPLE = Source(id="u/c/d1/c0", document_id="d1", text="a knows b", distance=0.5,
                s=Term(t="i", i="http://ex/a"), p=Term(t="i", i="http://ex/knows"),
                o=Term(t="l", v="b"))
WIRE_SOURCES = [SOURCE.model_dump(exclude_none=True), TRIPLE.model_dump(exclude_none=True)]


def metadata(**fields) -> tuple[bytes, bool]:
    return encode(RagResponse(message_type="metadata", sources=[SOURCE, TRIPLE], **fields)), False


def chunk(text: str) -> tuple[bytes, bool]:
    return encode(RagResponse(message_type="chunk", chunk=text)), False


def final(**fields) -> tuple[bytes, bool]:
    return encode(RagResponse(message_type="chunk", chunk="", end_of_stream=True,
                              end_of_session=True, sources=[SOURCE], in_token=11,
                              out_token=3, model="m", **fields)), True


def decoded(batch):
    return [json.loads(data) for data, _ in batch]


# --- the RAG rows on the wire --------------------------------------------------------

@pytest.mark.parametrize("name", ["graph-rag", "document-rag"])
def test_a_whole_answer_waiting_at_once_keeps_metadata_and_final_apart(name):
    row = SERVICES[name]
    batch = [metadata(optimized_query="q2", subqueries=["a"]), chunk("a"), chunk("b"),
             chunk("c"), final()]
    wire = wired(row, batch, first=True)
    assert decoded(wire) == [
        {"message_type": "metadata", "sources": WIRE_SOURCES, "optimized_query": "q2",
         "subqueries": ["a"], "end_of_stream": False},
        {"message_type": "chunk", "chunk": "abc", "end_of_stream": False},
        json.loads(batch[-1][0])]
    assert [is_final for _, is_final in wire] == [False, False, True]
    assert wire[0][0] is batch[0][0]  # complete already: passed through, not re-encoded


def test_metadata_always_says_optimized_query_and_subqueries():
    [(data, _)] = wired(SERVICES["graph-rag"], [metadata()], first=True)
    assert json.loads(data) == {"message_type": "metadata", "sources": WIRE_SOURCES,
                                "optimized_query": None, "subqueries": [],
                                "end_of_stream": False}


def test_metadata_is_not_merged_even_next_to_chunks_with_its_keys():
    # A metadata record that (wrongly) carried an empty chunk still stays whole.
    odd = encode(RagResponse(message_type="metadata", chunk="", sources=[SOURCE])), False
    wire = wired(SERVICES["document-rag"], [odd, chunk("x"), chunk("y")], first=True)
    assert [record["message_type"] for record in decoded(wire)] == ["metadata", "chunk"]
    assert decoded(wire)[1]["chunk"] == "xy"


def test_a_final_chunk_record_never_repeats_the_answer():
    [(data, is_final)] = wired(SERVICES["graph-rag"], [final(response="abc")])
    assert is_final and "response" not in json.loads(data)
    assert json.loads(data)["chunk"] == ""


def test_a_non_streaming_answer_keeps_its_response():
    whole = encode(RagResponse(response="abc", end_of_stream=True, end_of_session=True,
                               sources=[SOURCE])), True
    assert wired(SERVICES["document-rag"], [whole], first=True) == [whole]


def test_deltas_after_the_first_batch_pass_through_untouched():
    batch = [chunk("a")]
    assert wired(SERVICES["graph-rag"], batch, first=False)[0][0] is batch[0][0]


# --- the answer-stream API: requests -------------------------------------------------

DISPATCHER = Dispatcher(bus=None, flows=["default"], timeout=1)
LAZY_OFF = Dispatcher(bus=None, flows=["default"], timeout=1)
LAZY_OFF.optional(LAZY_RAG_SERVICES, HOW, on=False)


def test_parse_builds_a_streaming_service_request_for_the_mode():
    query, row, record = parse(DISPATCHER, {
        "query": "why?", "mode": "graph", "user": "alice", "collection": "c",
        "entity-limit": 5, "max_path_length": 3, "optimize_query": True})
    assert row.name == "graph-rag" and query.stream is False
    assert (record.query, record.user, record.collection, record.entity_limit,
            record.max_path_length, record.optimize_query, record.streaming) == (
        "why?", "alice", "c", 5, 3, True, True)


def test_parse_defaults_to_document_mode_and_service_defaults():
    _, row, record = parse(DISPATCHER, {"query": "q"})
    assert row.name == "document-rag" and record.doc_limit == 20
    assert (record.user, record.collection) == ("trustgraph", "default")


@pytest.mark.parametrize("body, status, starts", [
    ({}, 400, "query: Field required"),
    ({"query": "q", "doc_limit": 0}, 400, "doc_limit: Input should be greater"),
    ({"query": "q", "mode": "graph", "doc_limit": 5}, 400, "doc_limit: not a parameter"),
    ({"query": "q", "flow": "other"}, 404, "unknown flow 'other'"),
])
def test_parse_refuses_naming_the_field(body, status, starts):
    with pytest.raises(GatewayError) as failure:
        parse(DISPATCHER, body)
    assert failure.value.status == status and failure.value.message.startswith(starts)


def test_parse_refuses_lazy_mode_while_lazy_rag_is_off_saying_how_to_enable_it():
    with pytest.raises(GatewayError) as failure:
        parse(LAZY_OFF, {"query": "q", "mode": "lazy"})
    assert (failure.value.status, failure.value.type) == (404, "disabled")
    assert "LAZY_RAG_ENABLED=true" in failure.value.message


# --- the answer-stream API: lines ----------------------------------------------------

async def lines_of(*frames) -> tuple[AnswerLines, list[dict]]:
    return await read_lines(RagResponse, *frames)


async def test_records_become_metadata_content_and_done_lines_of_the_documented_shape():
    lines, out = await lines_of(metadata(subqueries=["s"]), chunk("a"), chunk("b"), final())
    assert out == [
        {"type": "metadata", "sources": WIRE_SOURCES, "optimized_query": None,
         "subqueries": ["s"], "request_id": "rid"},
        {"type": "content", "delta": "a"}, {"type": "content", "delta": "b"},
        {"type": "done", "usage": {"in_token": 11, "out_token": 3, "model": "m"}}]
    MetadataLine.model_validate(out[0])
    ContentLine.model_validate(out[1])
    DoneLine.model_validate(out[-1])
    assert CollectedAnswer.model_validate(lines.collected()).response == "ab"


async def test_token_counts_are_summed_across_records():
    counted = encode(RagResponse(message_type="chunk", chunk="a", in_token=2)), False
    _, out = await lines_of(metadata(), counted, final())
    assert out[-1]["usage"] == {"in_token": 13, "out_token": 3, "model": "m"}


async def test_a_one_record_answer_still_gives_metadata_first():
    whole = encode(RagResponse(response="all", end_of_stream=True, sources=[SOURCE],
                               optimized_query="better")), True
    lines, out = await lines_of(whole)
    assert [line["type"] for line in out] == ["metadata", "content", "done"]
    assert out[0]["optimized_query"] == "better" and out[1]["delta"] == "all"
    assert lines.collected()["sources"] == [SOURCE.model_dump(exclude_none=True)]


async def test_an_error_record_raises_and_becomes_an_error_line():
    failed = encode(RagResponse.failure(Error(type="graph-rag-error", message="boom"))), True
    with pytest.raises(ServiceError) as failure:
        await lines_of(metadata(), failed)
    line = json.loads(error_line(failure.value))
    assert line == {"type": "error", "message": "boom", "error_type": "graph-rag-error"}
    ErrorLine.model_validate(line)


async def test_deltas_waiting_with_an_error_are_lines_before_the_error():
    failed = encode(RagResponse.failure(Error(type="graph-rag-error", message="boom"))), True

    lines = AnswerLines(RagResponse)  # all arrived while the gateway was busy
    with pytest.raises(ServiceError):
        await lines.read([metadata(), chunk("a"), chunk("b"), failed])
    out = lines.lines
    assert [line["type"] for line in out] == ["metadata", "content", "content"]
    assert "".join(line.get("delta", "") for line in out) == "ab"
