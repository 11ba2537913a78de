"""Why an answer cited what it cited, kept with its trace (docs/observability.md):
document-rag and graph-rag with their real retrieval (hybrid, mixed) on a real
broker, the real embedding model and stores, traced in this process; each answer's
explanation is read back from the trace store as the gateway serves it, and one
question's spans cover every service it crossed, in one trace."""
import asyncio
import shutil
import tempfile
from pathlib import Path

import pytest
import pytest_asyncio

from tests.integration.test_graph_rag_bus import ACME, load_graph
from tests.support.openai_server import Script
from tests.support.rag_processors import REWRITE, RagLlm, RagProcessors
from tests.support.traces import asking, traced
from trustgraph.schema import DocumentRagRequest, GraphRagRequest

CHUNKS = {("manual", "Roadrunner manual"): [
    "The Roadrunner engine is built in Leeds by Acme Rockets.",
    "Fault ZQ-7731 means the coolant valve is stuck open.",
    "Acme Rockets was founded by Ada Quill in 1952."]}

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(broker):
    data_dir = Path(tempfile.mkdtemp(
        prefix="tg-explain-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    with traced(data_dir) as traces:
        llm = await RagLlm(Script(tokens=4)).start()
        stack = await RagProcessors(broker, llm, data_dir, retrieval={
            "tg_retrieval": "hybrid", "tg_graph_mix": True}).start()
        try:
            await asyncio.gather(stack.load_chunks("alice", "acme", CHUNKS),
                                 load_graph(stack, "alice", "acme", ACME))
            stack.traces = traces
            yield stack
        finally:
            await stack.stop()
            await llm.stop()
    shutil.rmtree(data_dir, ignore_errors=True)


async def test_document_rag_explains_its_question_candidates_and_what_it_kept(stack):
    with asking():
        frames = await stack.frames("document-rag", DocumentRagRequest(
            query="What is made in Leeds?", user="alice", collection="acme", doc_limit=2,
            optimize_query=True, streaming=True))
    cited = [source.id for source in frames[0].sources]
    explained = await stack.traces.latest_explanation("document-rag")
    assert (explained["question"], explained["optimized_query"]) == \
        ("What is made in Leeds?", REWRITE)
    assert explained["searches"] == [REWRITE]
    assert (explained["user"], explained["collection"]) == ("alice", "acme")
    kept = [c for c in explained["candidates"] if c["kept"]]
    assert [c["id"] for c in kept] == cited and explained["kept"] == 2
    assert explained["considered"] == len(explained["candidates"]) >= 2
    assert all(c["kind"] == "chunk" and "fused" in c["scores"] for c in explained["candidates"])
    assert explained["template"] == "document-prompt" and explained["prompt_chars"] > 100
    assert (explained["model"], explained["out_token"]) == ("fake-gpt", frames[-1].out_token)


async def test_graph_rag_explains_its_seeds_and_ranked_edges(stack):
    with asking():
        frames = await stack.frames("graph-rag", GraphRagRequest(
            query="Who founded Acme Rockets?", user="alice", collection="acme",
            max_subgraph_size=2, streaming=True))
    cited = [source.text for source in frames[0].sources]
    explained = await stack.traces.latest_explanation("graph-rag")
    seeds = {seed["label"]: seed["score"] for seed in explained["seeds"]}
    assert "Acme Rockets" in seeds and all(0 < score <= 1.0001 for score in seeds.values())
    assert explained["chunk_seeds"] and all(c["kept"] for c in explained["chunk_seeds"])
    edges = explained["candidates"]
    assert [e["text"] for e in edges if e["kept"]] != [] and explained["kept"] == 2
    assert sorted(e["text"] for e in edges if e["kept"]) == sorted(cited)
    assert len(edges) > 2 and not all(e["kept"] for e in edges)  # some were dropped
    assert all({"seed", "pagerank", "fused"} <= set(e["scores"]) for e in edges)
    assert explained["template"] == "kg-prompt"


async def test_one_question_is_one_trace_through_every_service_it_crossed(stack):
    with asking() as asked:
        await stack.frames("graph-rag", GraphRagRequest(
            query="Which engine does Acme make?", user="alice", collection="acme",
            streaming=True))
    crossed = {"graph-rag", "prompt", "text-completion", "embeddings", "graph-embeddings",
               "document-embeddings", "lexical-search", "subgraph"}
    trace = await stack.traces.settled(asked, crossed)
    served = {span["name"]: span for span in trace["spans"] if span["kind"] == "SERVER"}
    ids = {span["span_id"]: span for span in trace["spans"]}
    for span in trace["spans"]:  # every span's parent is in the trace, but the root's
        assert span["parent_id"] is None or span["parent_id"] in ids
    [root] = [span for span in trace["spans"] if span["parent_id"] is None]
    assert root["name"] == "test question"
    rag = served["graph-rag"]["attributes"]
    assert 0 < rag["tg.time_to_sources_ms"] <= rag["tg.time_to_first_token_ms"]
    assert (rag["tg.user"], rag["tg.collection"]) == ("alice", "acme")
    assert served["prompt"]["attributes"]["tg.prompt.template"] == "kg-prompt"
    assert served["embeddings"]["attributes"]["embedding.model_name"]
    assert trace["explained"]
