"""Hybrid retrieval over a real broker, with the real model and stores
(tests/support/rag_processors.py's ``RagProcessors``, its services built with their
retrieval settings, hybrid and mixed): an exact rare term that vector search misses
is found, the lexical index is scoped by user and collection and forgets a removed
document, and sources carry what each retriever scored."""
import asyncio
import shutil
import tempfile
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.openai_server import Script
from tests.support.rag_processors import RagLlm, RagProcessors
from tests.support.waiting import eventually
from trustgraph.schema import (
    DocumentEmbeddingsResponse,
    DocumentRagRequest,
    DocumentRef,
    DocumentRemoved,
    GraphRagRequest,
    LexicalSearchRequest,
)

CODES = {("codes", "Fault codes of the Roadrunner engine"): [
    "Fault ZQ-7731 means the coolant valve is stuck open; close it by hand.",
    "Fault ZQ-7713 means the fuel pump lost pressure; replace its seal.",
    "Fault ZQ-1377 means the igniter failed to spark; clean its contacts.",
    "Fault ZQ-3177 means the nozzle overheated; let it cool for an hour."]}
OTHER = {("other-codes", "Someone else's codes"): [
    "Fault ZQ-7731 means the cabin lights flicker."]}
QUESTION = "What does fault ZQ-7731 mean?"


# One stack for the module: starting one (the model, every processor) is most of the
# time these tests take.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(broker):
    data_dir = Path(tempfile.mkdtemp(
        prefix="tg-hybrid-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    llm = await RagLlm(Script(tokens=3)).start()
    stack = await RagProcessors(broker, llm, data_dir, retrieval={
        "tg_retrieval": "hybrid", "tg_graph_mix": True}).start()
    try:
        await asyncio.gather(stack.load_chunks("alice", "engines", CODES),
                             stack.load_chunks("bob", "engines", OTHER))
        yield stack
    finally:
        await stack.stop()
        await llm.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def ask(retrieval: str | None = None, **request) -> DocumentRagRequest:
    return DocumentRagRequest(**{"query": QUESTION, "user": "alice", "collection": "engines",
                                 "doc_limit": 1, "retrieval": retrieval, **request})


async def test_an_exact_rare_term_is_found_by_words_where_vectors_miss_it(stack):
    [vector] = await stack.frames("document-rag", ask("vector"))
    assert vector.sources[0].id != "codes/c0"  # the numbers all look alike as vectors
    [lexical] = await stack.frames("document-rag", ask("lexical"))
    assert [s.id for s in lexical.sources] == ["codes/c0"]
    assert lexical.sources[0].distance is None  # no vector search: no cosine distance
    assert set(lexical.sources[0].scores) == {"lexical", "fused"}
    # Hybrid (the service's default here: TG_RETRIEVAL=hybrid) has both retrievers' best
    # in its first two, each with what each retriever scored it.
    [hybrid] = await stack.frames("document-rag", ask(doc_limit=2))
    found = {s.id: s for s in hybrid.sources}
    assert set(found) == {"codes/c0", vector.sources[0].id}
    assert found["codes/c0"].scores["lexical"] > 0 and found["codes/c0"].order == 0
    assert all("fused" in s.scores and {"vector", "lexical"} & set(s.scores)
               for s in hybrid.sources)


async def test_the_lexical_index_is_scoped_and_forgets_a_removed_document(stack):
    index = await stack.requester("lexical-search")

    async def search(user: str) -> list[str]:
        found = await index.call(LexicalSearchRequest(query="ZQ-7731", user=user,
                                                      collection="engines", limit=10),
                                 DocumentEmbeddingsResponse)
        return [chunk.chunk_id for chunk in found.chunks]

    assert (await search("alice"))[0] == "codes/c0" and await search("bob") == [
        "other-codes/c0"]
    assert await search("carol") == []
    await stack.emit("document-removed", DocumentRemoved(document=DocumentRef(
        id="codes", user="alice", collection="engines")))
    await eventually(lambda: search("alice"), "alice's removed document unindexed",
                     accept=lambda found: found == [], timeout=60)
    assert await search("bob") == ["other-codes/c0"]


async def test_mixed_graph_rag_answers_from_an_empty_graph_without_failing(stack):
    """No triples were loaded: mixed retrieval still searches the chunks, finds no
    seed entities, and answers from no statements."""
    [record] = await stack.frames("graph-rag", GraphRagRequest(
        query=QUESTION, user="alice", collection="engines"))
    assert record.error is None and record.sources == []
