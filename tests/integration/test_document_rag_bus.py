"""document-rag over a real pulsar-lite broker with every part it needs running in
this process: config, prompt, text-completion (openai provider → a local
OpenAI-format server), embeddings (the real all-MiniLM-L6-v2), the chunk-embedding
stage and the vector store (Qdrant Edge on disk). The corpus goes in through the
ingestion pipeline's ``chunks`` stage, as the chunker sends it.

The processors are in tests/support/rag_processors.py, shared with test_graph_rag_bus.py.
"""
import asyncio

import pytest
import pytest_asyncio

from tests.support.openai_server import PROMPT_TOKENS, Script, expected_text
from tests.support.rag_processors import REWRITE, SUBQUERIES, rag_processors
from trustgraph.base import ServiceError
from trustgraph.schema import (
    DocumentEmbeddingsRequest,
    DocumentEmbeddingsResponse,
    DocumentRagRequest,
    RagResponse,
    ReembedRequest,
    ReembedResponse,
    decode,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rag(broker, module_data_dir):
    """One set of processors for the module (their start and stop cost seconds); each
    test asks in its own way and none changes the corpus."""
    async with rag_processors(broker, module_data_dir) as rag:
        yield rag


@pytest.fixture(autouse=True)
def answer_in_12_tokens(rag):
    rag.llm.script = Script(tokens=12)  # a test may have scripted something else


ACME = {
    ("acme-history", "A history of Acme"): [
        "Acme Rockets was founded in 1952 by Ada Quill in Tucson, Arizona.",
        "In 1970 Acme Rockets moved its factory to Houston, where it builds the "
        "Roadrunner engine."],
    ("acme-catalogue", "The Acme catalogue"): [
        "The Roadrunner engine burns liquid oxygen and kerosene.",
        "The catalogue also lists anvils, giant magnets and portable holes."],
}
# The same question has another answer in another collection, and another user's.
ZETA = {("zeta-notes", "Zeta notes"): [
    "Acme Rockets was founded in 1961 by Bruno Rossi in Milan, Italy.",
    "Zeta Motors makes electric scooters in Lyon."]}
BOBS = {("bob-notes", "Bob's notes"): ["Acme Rockets was founded in 2001 by Bob Stone."]}
QUESTION = "When was Acme Rockets founded, and by whom?"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def corpus(rag):
    await asyncio.gather(rag.load_chunks("alice", "acme", ACME),
                         rag.load_chunks("alice", "zeta", ZETA),
                         rag.load_chunks("bob", "acme", BOBS))
    return rag


def ask(**request) -> DocumentRagRequest:
    return DocumentRagRequest(**{"query": QUESTION, "user": "alice", "collection": "acme",
                                 **request})


async def test_streaming_sources_first_then_deltas_then_one_final(corpus):
    metadata, *deltas, final = await corpus.frames("document-rag", ask(streaming=True))
    assert metadata.message_type == "metadata" and not metadata.end_of_stream
    nearest = metadata.sources[0]
    assert (nearest.id, nearest.document_id, nearest.title) == (
        "acme-history/c0", "acme-history", "A history of Acme")
    assert nearest.text == ACME[("acme-history", "A history of Acme")][0]
    assert 0 <= nearest.distance < 0.5
    assert [s.distance for s in metadata.sources] == sorted(s.distance for s in metadata.sources)
    assert deltas and all(d.message_type == "chunk" and not d.end_of_stream for d in deltas)
    assert "".join(d.chunk for d in deltas) == expected_text(12)
    assert (final.message_type, final.chunk, final.response) == ("chunk", "", None)
    assert final.end_of_stream and final.end_of_session and final.error is None
    assert final.sources == metadata.sources
    assert (final.in_token, final.out_token, final.model) == (PROMPT_TOKENS, 12, "fake-gpt")
    prompt = corpus.llm.answer_prompt()  # the LLM saw the chunks and the question
    assert nearest.text in prompt and f"Question: {QUESTION}" in prompt


async def test_not_streaming_answers_in_one_record(corpus):
    [record] = await corpus.frames("document-rag", ask())
    assert record.response == expected_text(12) and record.chunk is None
    assert record.end_of_stream and record.end_of_session
    assert record.sources[0].id == "acme-history/c0"
    assert (record.in_token, record.out_token, record.model) == (PROMPT_TOKENS, 12, "fake-gpt")


@pytest.mark.parametrize("streaming", [True, False])
async def test_the_request_s_sampling_options_reach_the_answer_s_llm_call(corpus, streaming):
    # max_tokens, temperature, stop: through prompt and text-completion to the provider,
    # for the answer only (the question rewrite keeps the provider's settings).
    sampling = {"max_tokens": 64, "temperature": 0.5, "stop": ["\n\n"]}
    *_, final = await corpus.frames("document-rag", ask(streaming=streaming, **sampling))
    assert final.error is None and final.end_of_stream
    assert corpus.llm.sampled(corpus.llm.last_body) == sampling
    [record] = await corpus.frames("document-rag", ask())
    assert corpus.llm.sampled(corpus.llm.last_body)["stop"] is None


@pytest.mark.parametrize("user, collection, documents, absent", [
    ("alice", "acme", {"acme-history", "acme-catalogue"}, ["1961", "2001"]),
    ("alice", "zeta", {"zeta-notes"}, ["1952", "2001"]),
    ("bob", "acme", {"bob-notes"}, ["1952", "1961"]),
])
async def test_a_question_in_one_collection_never_cites_another(corpus, user, collection,
                                                                documents, absent):
    [record] = await corpus.frames("document-rag", ask(user=user, collection=collection))
    assert record.sources and {s.document_id for s in record.sources} == documents
    prompt = corpus.llm.answer_prompt()
    assert not [year for year in absent if year in prompt]


async def test_optimised_question_and_subqueries_are_searched_and_reported(corpus):
    metadata, *_, final = await corpus.frames("document-rag", ask(
        streaming=True, optimize_query=True, subqueries=True, doc_limit=2))
    assert (metadata.optimized_query, metadata.subqueries) == (REWRITE, SUBQUERIES)
    # Each of the three searches contributes its nearest chunk within doc-limit 2…
    ids = [s.id for s in metadata.sources]
    assert len(ids) == 2 and "acme-history/c0" in ids
    # …and the answer is to the question as asked.
    assert f"Question: {QUESTION}" in corpus.llm.answer_prompt()
    assert final.in_token == 3 * PROMPT_TOKENS  # rewrite, decompose and answer


async def test_an_empty_collection_is_answered_from_no_excerpts(corpus):
    metadata, *_, final = await corpus.frames("document-rag", ask(
        collection="nothing-here", streaming=True))
    assert metadata.sources == [] and final.sources == [] and final.end_of_stream
    assert "(no excerpts were found)" in corpus.llm.answer_prompt()


async def test_an_llm_failure_mid_answer_ends_with_one_error_record(corpus):
    corpus.llm.script = Script(tokens=10, fail_after=3)
    records = await corpus.frames("document-rag", ask(streaming=True))
    metadata, *deltas, last = records
    assert metadata.message_type == "metadata"
    assert "".join(d.chunk for d in deltas) == expected_text(3)
    assert not any(d.end_of_stream or d.error for d in deltas)
    assert last.error.type == "document-rag-error"
    assert last.error.message.startswith("answering (document-prompt) failed: llm-error")
    assert last.end_of_stream and last.end_of_session


async def test_a_client_leaving_mid_answer_stops_the_llm_stream(corpus):
    corpus.llm.script = Script(tokens=1000, delay=0.01)
    requester = await corpus.requester("document-rag")
    frames = requester.frames(ask(streaming=True))
    seen: list[RagResponse] = []
    async for batch in frames:
        seen += [decode(RagResponse, data) for data, _ in batch]
        if any(r.chunk for r in seen):
            break
    assert corpus.llm.stats.open_streams == 1  # ~10 s of tokens still to come
    await frames.aclose()  # sends the cancel
    await asyncio.wait_for(corpus.llm.disconnected.wait(), 3.0)


async def test_a_collection_embedded_by_one_model_refuses_another_models_vectors(corpus):
    """The chunk stage stamped the collection with the embeddings service's model;
    a search whose vector says another model is a bad request naming both."""
    store = await corpus.requester("document-embeddings")
    vector = await corpus.vector(QUESTION)

    def search(model: str | None) -> DocumentEmbeddingsRequest:
        return DocumentEmbeddingsRequest(vector=vector, user="alice", collection="acme",
                                         limit=2, model=model)
    found = await store.call(search("all-MiniLM-L6-v2"), DocumentEmbeddingsResponse)
    assert found.chunks[0].chunk_id == "acme-history/c0"
    assert (await store.call(search(None), DocumentEmbeddingsResponse)).chunks
    with pytest.raises(ServiceError) as refused:
        await store.call(search("text-embedding-3-small"), DocumentEmbeddingsResponse)
    assert refused.value.error.type == "bad-request"
    assert "alice/acme was embedded with 'all-MiniLM-L6-v2'" in refused.value.error.message
    assert "tg-reembed -C acme" in refused.value.error.message


async def test_reembedding_a_collection_through_the_bus_reports_progress(corpus):
    reembedding = await corpus.requester("reembed")
    records = [r async for r in reembedding.stream(
        ReembedRequest(user="alice", collection="zeta", page=1), ReembedResponse)]
    *progress, last = records
    assert [r.chunks for r in progress] == [1, 2] and not any(r.end_of_stream for r in progress)
    assert last.end_of_stream and (last.chunks, last.total) == (2, 2)
    assert (last.model, last.previous_model) == ("all-MiniLM-L6-v2", "all-MiniLM-L6-v2")
    metadata, *_ = await corpus.frames("document-rag", ask(collection="zeta", streaming=True))
    assert metadata.sources[0].document_id == "zeta-notes"
