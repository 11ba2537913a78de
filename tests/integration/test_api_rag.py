"""The client library's RAG methods (``graph_rag``, ``document_rag`` over the
websocket, ``query`` over the answer-stream REST API) and their blocking wrappers,
against a real gateway and broker in front of scripted RAG services
(tests/support/scripted_rag.py). One stack serves the module, on a flow of its own.
"""
import asyncio
import uuid
from collections.abc import Callable

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
from trustgraph.api import (
    Answer,
    AsyncTrustGraph,
    Chunk,
    Final,
    Metadata,
    RagStream,
    TrustGraph,
    TrustGraphError,
    Usage,
)
from trustgraph.pubsub.embedded import free_port

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEADLINE = 30.0
TOKEN = "rag-token"
USAGE = {"in_token": PROMPT_TOKENS, "model": MODEL}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rig(broker):
    """An open gateway (``url``) and one requiring TOKEN (``guarded_url``)."""
    async with scripted_rag_gateway(broker.url, TOKEN) as stack:
        yield stack


@pytest_asyncio.fixture(loop_scope="module")
async def tg(rig):
    async with AsyncTrustGraph(rig.url) as client:
        yield client


async def events_of(stream) -> list:
    async with asyncio.timeout(DEADLINE):
        return [event async for event in stream]


async def text_before_failure(stream) -> tuple[str, TrustGraphError]:
    """The answer's text up to the error the stream raised, and that error."""
    texts = []
    with pytest.raises(TrustGraphError) as failure:
        async for event in stream:
            if isinstance(event, Chunk):
                texts.append(event.text)
    return "".join(texts), failure.value


async def check_leaving_early_cancels(rig: ScriptedRagGateway,
                                      ask: Callable[[str], RagStream]) -> None:
    """Leave the stream of a long answer, ``ask(query)``, at its first chunk: the
    service sees the answer cancelled."""
    query = f"[tokens=5000 delay=0.01] {uuid.uuid4().hex}"
    async for event in ask(query):
        if isinstance(event, Chunk):
            break
    await rig.rag.wait_cancelled(query, 2.0)


def check_events(events: list, service: str, tokens: int, request_id: str | None = None
                 ) -> None:
    """One metadata event first, the chunks making the answer, one final event last."""
    metadata, *chunks, final = events
    assert metadata == Metadata(wire_sources(service), None, [], request_id)
    assert chunks and all(isinstance(chunk, Chunk) for chunk in chunks)
    assert "".join(chunk.text for chunk in chunks) == expected_text(tokens)
    assert final == Final(wire_sources(service), Usage(out_token=tokens, **USAGE))


# --- over the websocket --------------------------------------------------------------

async def test_graph_rag_answer(rig, tg):
    answer = await tg.graph_rag("[tokens=6]", flow=rig.flow)
    assert isinstance(answer, Answer) and answer == expected_text(6)
    assert answer.sources == wire_sources("graph-rag")
    assert answer.usage == Usage(out_token=6, **USAGE)
    assert rig.rag.requests[-1].streaming is False


@pytest.mark.parametrize("service", ["graph-rag", "document-rag"])
async def test_streams_give_metadata_chunks_and_final(rig, tg, service):
    ask = tg.graph_rag if service == "graph-rag" else tg.document_rag
    stream = ask("[tokens=50]", streaming=True, flow=rig.flow)
    check_events(await events_of(stream), service, 50)
    assert stream.usage == Usage(out_token=50, **USAGE)
    assert rig.rag.requests[-1].streaming is True


async def test_options_reach_the_service(rig, tg):
    answer = await tg.document_rag("what?", user="ann", collection="notes", doc_limit=4,
                                   optimize_query=True, subqueries=True, flow=rig.flow)
    assert answer.sources == wire_sources("document-rag", "ann", "notes")
    assert answer.optimized_query == "rewritten: what?"
    assert answer.subqueries == ["what? (part 1)", "what? (part 2)"]
    request = rig.rag.requests[-1]
    assert (request.user, request.collection, request.doc_limit) == ("ann", "notes", 4)
    await tg.graph_rag("who?", entity_limit=3, triple_limit=4, max_subgraph_size=5,
                       max_path_length=1, flow=rig.flow)
    request = rig.rag.requests[-1]
    assert (request.entity_limit, request.triple_limit, request.max_subgraph_size,
            request.max_path_length) == (3, 4, 5, 1)


async def test_service_failure_raises_after_the_text_before_it(rig, tg):
    text, failure = await text_before_failure(
        tg.graph_rag("[tokens=9 fail_after=4]", streaming=True, flow=rig.flow))
    assert (failure.type, failure.message) == ("graph-rag-error", "scripted failure")
    assert text == expected_text(4)


async def test_leaving_a_websocket_stream_early_cancels_the_answer(rig, tg):
    await check_leaving_early_cancels(
        rig, lambda query: tg.graph_rag(query, streaming=True, flow=rig.flow))


# --- the answer-stream API over REST -------------------------------------------------

@pytest.mark.parametrize("mode, service", [("document", "document-rag"),
                                           ("graph", "graph-rag")])
async def test_query_stream_events(rig, tg, mode, service):
    stream = tg.query("[tokens=30]", mode=mode, stream=True, flow=rig.flow)
    events = await events_of(stream)
    check_events(events, service, 30, request_id=rig.rag.ids[-1])
    assert stream.metadata.request_id == rig.rag.ids[-1]


async def test_query_answer(rig, tg):
    answer = await tg.query("[tokens=7]", mode="graph", subqueries=True, entity_limit=2,
                            collection="c2", flow=rig.flow)
    assert answer == expected_text(7) and answer.request_id == rig.rag.ids[-1]
    assert answer.sources == wire_sources("graph-rag", collection="c2")
    assert answer.subqueries == ["[tokens=7] (part 1)", "[tokens=7] (part 2)"]
    assert answer.usage == Usage(out_token=7, **USAGE)
    assert rig.rag.requests[-1].entity_limit == 2


async def test_query_from_a_websocket_url(rig):
    async with AsyncTrustGraph(rig.url.replace("http://", "ws://") + "api/v1/socket") as tg:
        assert await tg.query("[tokens=2]", flow=rig.flow) == expected_text(2)


async def test_query_failure_mid_answer_raises_the_services_error(rig, tg):
    text, failure = await text_before_failure(
        tg.query("[tokens=9 fail_after=2]", stream=True, flow=rig.flow))
    assert failure.type == "document-rag-error"
    assert text == expected_text(2)


@pytest.mark.parametrize("options, error_type, named", [
    ({"mode": "lazy"}, "disabled", "LAZY_RAG_ENABLED=true"),
    ({"mode": "graph", "doc_limit": 3}, "bad-request", "doc_limit"),
    ({"flow": "nowhere"}, "unknown-flow", "nowhere"),
])
async def test_query_refusals_are_errors_naming_why(rig, tg, options, error_type, named):
    options.setdefault("flow", rig.flow)
    for stream in (False, True):
        with pytest.raises(TrustGraphError) as failure:
            answer = tg.query("q", stream=stream, **options)
            await (events_of(answer) if stream else answer)
        assert failure.value.type == error_type and named in failure.value.message


async def test_leaving_a_query_stream_early_cancels_the_answer(rig, tg):
    await check_leaving_early_cancels(
        rig, lambda query: tg.query(query, stream=True, flow=rig.flow))


async def test_query_with_a_token(rig):
    async with AsyncTrustGraph(rig.guarded_url, TOKEN) as tg:
        assert await tg.query("[tokens=3]", flow=rig.flow) == expected_text(3)
    async with AsyncTrustGraph(rig.guarded_url) as tg:
        with pytest.raises(TrustGraphError) as failure:
            await tg.query("q", flow=rig.flow)
    assert failure.value.type == "auth-required"
    async with AsyncTrustGraph(rig.guarded_url, "wrong") as tg:
        with pytest.raises(TrustGraphError) as failure:
            await events_of(tg.query("q", stream=True, flow=rig.flow))
    assert failure.value.type == "auth-failed"


async def test_query_to_no_gateway_is_a_connection_error():
    async with AsyncTrustGraph(f"http://127.0.0.1:{free_port()}/") as tg:
        with pytest.raises(TrustGraphError) as failure:
            await tg.query("q")
    assert failure.value.type == "connection"
    assert "connection refused" in failure.value.message


# --- the blocking client: the same methods, bridged ------------------------------------

async def test_blocking_client(rig):
    def use() -> tuple:
        with TrustGraph(rig.url) as tg:
            answer = tg.graph_rag("[tokens=4]", flow=rig.flow)
            stream = tg.document_rag("[tokens=12]", streaming=True, flow=rig.flow)
            events = list(stream)
            queried = tg.query("[tokens=5]", mode="graph", stream=True, flow=rig.flow)
            lines = list(queried)
            return answer, events, stream.usage, lines, tg.query("[tokens=3]", flow=rig.flow)

    answer, events, usage, lines, collected = await asyncio.wait_for(
        asyncio.to_thread(use), DEADLINE)
    assert answer == expected_text(4) and answer.sources == wire_sources("graph-rag")
    check_events(events, "document-rag", 12)
    assert usage == Usage(out_token=12, **USAGE)
    assert [type(event) for event in (lines[0], lines[-1])] == [Metadata, Final]
    assert "".join(event.text for event in lines if isinstance(event, Chunk)) == \
        expected_text(5)
    assert collected == expected_text(3) and collected.request_id


async def test_blocking_client_leaving_a_stream_cancels_it(rig):
    query = f"[tokens=5000 delay=0.01] {uuid.uuid4().hex}"

    def use() -> None:
        with TrustGraph(rig.url) as tg:
            for event in tg.query(query, stream=True, flow=rig.flow):
                if isinstance(event, Chunk):
                    break

    await asyncio.wait_for(asyncio.to_thread(use), DEADLINE)
    await rig.rag.wait_cancelled(query, 2.0)
