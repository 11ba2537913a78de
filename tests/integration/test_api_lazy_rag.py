"""The client library's LazyRAG methods (``lazy_rag`` over the websocket, streamed or
collected; ``lazy_rag_expand``, ``lazy_rag_status``; ``query(mode="lazy")`` over the
answer-stream REST API) and the blocking client, against a real gateway and broker in
front of scripted LazyRAG services (tests/support/scripted_lazy_rag.py).
"""
import asyncio

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
from tests.support.scripted_rag import wire_sources
from trustgraph.api import (
    AsyncTrustGraph,
    Chunk,
    Final,
    LazyAnswer,
    LazyResult,
    Metadata,
    TrustGraph,
    TrustGraphError,
    Usage,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEADLINE = 30.0
USAGE = {"in_token": PROMPT_TOKENS, "model": MODEL}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rig(broker):
    async with scripted_lazy_rag_stack(broker.url) as stack:
        yield stack


@pytest_asyncio.fixture(loop_scope="module")
async def tg(rig):
    async with AsyncTrustGraph(rig.url) as client:
        yield client


def lazy_result(request: dict, summary_error: dict | None = None) -> LazyResult:
    """What the client should make of the scripted service's answer to ``request``."""
    return LazyResult(**wire_subgraph(request), summary_error=summary_error)


async def test_lazy_rag_answer_carries_the_lazy_fields(rig, tg):
    answer = await tg.lazy_rag("[tokens=6]", user="ann", collection="notes", max_hops=1,
                               max_entities=2, use_communities=False, flow=rig.flow)
    request = {"query": "[tokens=6]", "user": "ann", "collection": "notes", "max_hops": 1,
               "max_entities": 2, "use_communities": False}
    assert isinstance(answer, LazyAnswer) and answer == expected_text(6)
    assert answer.lazy == lazy_result(request)
    expected = wire_subgraph(request)
    assert (answer.confidence, answer.missing_info, answer.entities, answer.relationships,
            answer.communities) == (expected["confidence"], expected["missing_info"],
                                    expected["entities"], expected["relationships"], [])
    assert answer.sources == wire_sources("lazy-rag", "ann", "notes")
    assert answer.usage == Usage(out_token=6, **USAGE)
    sent = rig.rag.requests[-1]
    assert (sent.max_hops, sent.max_entities, sent.use_communities, sent.streaming) == (
        1, 2, False, False)


async def test_lazy_rag_streams_metadata_chunks_and_a_final_with_the_lazy_result(rig, tg):
    stream = tg.lazy_rag("[tokens=30]", streaming=True, flow=rig.flow)
    async with asyncio.timeout(DEADLINE):
        events = [event async for event in stream]
    metadata, *chunks, final = events
    assert metadata == Metadata(wire_sources("lazy-rag"))
    assert all(isinstance(chunk, Chunk) for chunk in chunks)
    assert "".join(chunk.text for chunk in chunks) == expected_text(30)
    assert final == Final(wire_sources("lazy-rag"), Usage(out_token=30, **USAGE),
                          lazy_result({"query": "[tokens=30]"}))
    assert stream.lazy == final.lazy
    assert rig.rag.requests[-1].streaming is True


async def test_options_left_out_are_not_sent(rig, tg):
    await tg.lazy_rag("q", flow=rig.flow)
    sent = rig.rag.requests[-1]
    assert (sent.max_hops, sent.max_entities, sent.use_communities) == (None, None, None)


async def test_an_llm_failure_is_an_answer_with_no_text_and_the_error(rig, tg):
    answer = await tg.lazy_rag("[summary_fail=1]", flow=rig.flow)
    assert answer == "" and answer.summary_error == SUMMARY_ERROR.model_dump()
    assert answer.lazy == lazy_result({"query": "[summary_fail=1]"},
                                      SUMMARY_ERROR.model_dump())


async def test_a_service_failure_raises(rig, tg):
    with pytest.raises(TrustGraphError) as failure:
        await tg.lazy_rag("[tokens=4 fail_after=1]", flow=rig.flow)
    assert (failure.value.type, failure.value.message) == ("lazy-rag-error", "scripted failure")


async def test_expand_and_status(rig, tg):
    found = await tg.lazy_rag_expand("who?", collection="c3", max_entities=1, flow=rig.flow)
    assert found == lazy_result({"query": "who?", "collection": "c3", "max_entities": 1})
    status = await tg.lazy_rag_status(collection="c3", flow=rig.flow)
    assert {key: status[key] for key in STATUS} == STATUS and status["enabled"] is True
    assert [entry["collection"] for entry in status["community_cache"]] == ["c3"]


async def test_query_in_mode_lazy(rig, tg):
    answer = await tg.query("[tokens=5]", mode="lazy", max_hops=2, flow=rig.flow)
    assert isinstance(answer, LazyAnswer) and answer == expected_text(5)
    assert answer.lazy == lazy_result({"query": "[tokens=5]", "max_hops": 2})
    assert answer.request_id == rig.rag.ids[-1]
    stream = tg.query("[tokens=3]", mode="lazy", stream=True, use_communities=False,
                      flow=rig.flow)
    events = [event async for event in stream]
    assert events[-1].lazy == lazy_result({"query": "[tokens=3]", "use_communities": False})


async def test_query_in_mode_lazy_while_it_is_off_names_the_fix(rig):
    async with AsyncTrustGraph(rig.off_url) as tg:
        with pytest.raises(TrustGraphError) as failure:
            await tg.query("q", mode="lazy", flow=rig.flow)
    assert failure.value.type == "disabled" and "LAZY_RAG_ENABLED" in failure.value.message


async def test_blocking_client(rig):
    def use() -> tuple:
        with TrustGraph(rig.url) as tg:
            answer = tg.lazy_rag("[tokens=4]", flow=rig.flow)
            stream = tg.lazy_rag("[tokens=7]", streaming=True, flow=rig.flow)
            events = list(stream)
            return answer, events, stream.lazy, tg.lazy_rag_expand("q", flow=rig.flow)

    answer, events, lazy, found = await asyncio.wait_for(asyncio.to_thread(use), DEADLINE)
    assert answer == expected_text(4) and answer.lazy == lazy_result({"query": "[tokens=4]"})
    assert "".join(e.text for e in events if isinstance(e, Chunk)) == expected_text(7)
    assert lazy == events[-1].lazy == lazy_result({"query": "[tokens=7]"})
    assert found == lazy_result({"query": "q"})
