"""RAG answers in the client library over scripted frames and lines: the events, the
collected answer, and the HTTP base derived from a gateway URL."""
import pytest

from trustgraph.api import (
    Answer,
    Chunk,
    Final,
    LazyAnswer,
    LazyResult,
    Metadata,
    RagStream,
    TrustGraphError,
    Usage,
)
from trustgraph.api.http import GatewayHttp, http_url
from trustgraph.api.rag import answer_from, events_from_frames, events_from_lines
from trustgraph.schema import LazyRagResponse

SOURCES = [{"id": "c1", "document_id": "d1", "title": "T", "text": "x", "distance": 0.1}]


def replay(*items):
    async def items_():
        for item in items:
            yield item
    return items_


async def test_streamed_frames_become_metadata_chunks_and_final():
    frames = replay(
        {"message_type": "metadata", "sources": SOURCES, "optimized_query": "q2",
         "subqueries": ["a", "b"], "end_of_stream": False},
        {"message_type": "chunk", "chunk": "he", "end_of_stream": False},
        {"message_type": "chunk", "chunk": "llo", "end_of_stream": False},
        {"message_type": "chunk", "chunk": "", "end_of_stream": True, "end_of_session": True,
         "sources": SOURCES, "in_token": 11, "out_token": 2, "model": "m"})
    stream = RagStream(lambda: events_from_frames(frames()))
    events = [event async for event in stream]
    assert events == [Metadata(SOURCES, "q2", ["a", "b"]), Chunk("he"), Chunk("llo"),
                      Final(SOURCES, Usage(11, 2, "m"))]
    assert stream.metadata == events[0] and stream.usage == Usage(11, 2, "m")
    assert stream.sources == SOURCES


async def test_a_one_frame_answer_gives_the_same_events_and_collects():
    frames = replay({"response": "whole", "end_of_stream": True, "sources": SOURCES,
                     "subqueries": [], "in_token": 3, "out_token": 1, "model": "m"})
    answer = await RagStream(lambda: events_from_frames(frames())).collect()
    assert isinstance(answer, Answer) and isinstance(answer, str) and answer == "whole"
    assert (answer.sources, answer.usage, answer.optimized_query, answer.subqueries) == (
        SOURCES, Usage(3, 1, "m"), None, [])


async def test_lines_become_the_same_events_with_the_request_id():
    lines = replay(
        {"type": "metadata", "sources": SOURCES, "optimized_query": None, "subqueries": [],
         "request_id": "r1"},
        {"type": "content", "delta": "a"}, {"type": "content", "delta": "b"},
        {"type": "done", "usage": {"in_token": 5, "out_token": 2, "model": "m"}})
    stream = RagStream(lambda: events_from_lines(lines()))
    answer = await stream.collect()
    assert answer == "ab" and answer.request_id == "r1" and answer.sources == SOURCES
    assert answer.usage == Usage(5, 2, "m") and stream.final.sources == SOURCES


async def test_an_error_line_raises_after_the_text_before_it():
    lines = replay({"type": "metadata", "sources": [], "request_id": "r"},
                   {"type": "content", "delta": "a"},
                   {"type": "error", "message": "boom", "error_type": "llm-error"})
    got = []
    with pytest.raises(TrustGraphError) as failure:
        async for event in RagStream(lambda: events_from_lines(lines())):
            got.append(event)
    assert (failure.value.type, failure.value.message) == ("llm-error", "boom")
    assert got[-1] == Chunk("a")


async def test_lines_that_stop_without_done_are_a_connection_error():
    lines = replay({"type": "metadata", "sources": []}, {"type": "content", "delta": "a"})
    with pytest.raises(TrustGraphError) as failure:
        await RagStream(lambda: events_from_lines(lines())).collect()
    assert failure.value.type == "connection"


async def test_a_stream_is_iterated_once():
    stream = RagStream(lambda: events_from_lines(replay({"type": "done"})()))
    await stream.collect()
    with pytest.raises(RuntimeError):
        aiter(stream)


def test_collected_body_becomes_an_answer():
    answer = answer_from({"response": "r", "sources": SOURCES, "optimized_query": "o",
                          "subqueries": ["s"], "request_id": "id",
                          "usage": {"in_token": 1, "out_token": 2, "model": "m",
                                    "added_later": True}})
    assert (answer, answer.sources, answer.optimized_query, answer.subqueries,
            answer.request_id, answer.usage) == ("r", SOURCES, "o", ["s"], "id",
                                                 Usage(1, 2, "m"))


@pytest.mark.parametrize("url, base", [
    ("http://localhost:8888/", "http://localhost:8888"),
    ("https://tg.example/", "https://tg.example"),
    ("ws://h:1/api/v1/socket", "http://h:1"),
    ("wss://h/prefix/api/v1/socket/", "https://h/prefix"),
    ("http://h/prefix/?token=x", "http://h/prefix"),
])
def test_http_base_from_a_gateway_url(url, base):
    assert http_url(url) == base


def test_endpoints_keep_the_urls_query():
    http = GatewayHttp("ws://h:1/api/v1/socket?token=t", connect_timeout=1)
    assert http.endpoint("/api/v1/query") == "http://h:1/api/v1/query?token=t"
    assert GatewayHttp("http://h/", connect_timeout=1).endpoint("/q") == "http://h/q"


def test_not_a_gateway_url():
    with pytest.raises(TrustGraphError) as failure:
        http_url("localhost:8888")
    assert failure.value.type == "connection"


# --- lazy-rag: the final record's LazyResult -------------------------------------------

LAZY = {"entities": [{"id": "http://ex/a", "label": "a", "hops": 0, "score": 1.0}],
        "relationships": [], "communities": [], "confidence": 0.0,
        "missing_info": ["when"], "generation_time_ms": 4.5, "community_cache": "miss"}


async def test_a_lazy_final_record_carries_its_lazy_result_and_collects_a_lazy_answer():
    frames = replay({"message_type": "metadata", "sources": SOURCES, "end_of_stream": False},
                    {"message_type": "chunk", "chunk": "x", "end_of_stream": False},
                    {"message_type": "chunk", "chunk": "", "end_of_stream": True, **LAZY})
    answer = await RagStream(lambda: events_from_frames(frames(), LazyRagResponse)).collect()
    assert isinstance(answer, LazyAnswer) and answer == "x"
    assert answer.lazy == LazyResult(**LAZY)
    assert (answer.confidence, answer.missing_info, answer.community_cache) == (
        0.0, ["when"], "miss")  # a confidence of 0 is a value, not a missing one


async def test_a_lazy_done_line_and_collected_body_carry_it_too():
    lines = replay({"type": "metadata", "sources": [], "request_id": "r"},
                   {"type": "done", "usage": {}, **LAZY, "summary_error": None})
    events = [event async for event in events_from_lines(lines(), LazyRagResponse)]
    assert events[-1].lazy == LazyResult(**LAZY)
    body = {"response": "", "usage": {}, **LAZY,
            "summary_error": {"type": "llm-error", "message": "down"}}
    assert answer_from(body, LazyRagResponse).summary_error == {"type": "llm-error",
                                                                "message": "down"}


def test_graph_and_document_answers_have_no_lazy_result():
    assert answer_from({"response": "x", "sources": SOURCES}).lazy is None
    with pytest.raises(AttributeError):
        _ = answer_from({"response": "x"}).confidence
