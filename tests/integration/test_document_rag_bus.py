"""document-rag over a real pulsar-lite broker with every part it needs running in
this process: config, prompt, text-completion (openai provider → a local
OpenAI-format server), embeddings (the real all-MiniLM-L6-v2), the chunk-embedding
stage and the vector store (Qdrant Edge on disk). The corpus goes in through the
ingestion pipeline's ``chunks`` stage, as the chunker sends it.

``RagStack`` is used by test_graph_rag_bus.py too.
"""
import asyncio
import json
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from tests.support.openai_server import PROMPT_TOKENS, OpenAiServer, Script, expected_text
from trustgraph.base import Processor, ProcessorSettings, Requester
from trustgraph.base.stage import Emitters
from trustgraph.config.service import SPEC as CONFIG_SPEC
from trustgraph.config.service import ConfigSettings
from trustgraph.ingest import embedding_stages as stages
from trustgraph.embeddings.provider import EmbeddingsSettings
from trustgraph.embeddings.service import SPEC as EMBEDDINGS
from trustgraph.model.text_completion.openai.provider import Settings as OpenAiSettings
from trustgraph.model.text_completion.service import spec_for
from trustgraph.prompt.defaults import DEFAULT_TEMPLATES
from trustgraph.prompt.service import SPEC as PROMPT_SPEC
from trustgraph.prompt.service import PromptSettings
from trustgraph.pubsub import Bus
from trustgraph.retrieval.document_rag import service as document_rag
from trustgraph.retrieval.graph_rag import service as graph_rag
from trustgraph.schema import (Chunk, DocumentEmbeddingsRequest, DocumentEmbeddingsResponse,
                               DocumentRagRequest, DocumentRef, EmbeddingsRequest,
                               EmbeddingsResponse, RagResponse, Record, decode)
from trustgraph.storage.triples import service as service_triples
from trustgraph.storage.vectors import service as service_vectors

REWRITE = "where and when Acme Rockets was founded"
SUBQUERIES = ["Who founded Acme Rockets?", "Where is the Roadrunner engine built?"]


class RagLlm(OpenAiServer):
    """Answers the query-rewrite and query-decompose prompts as a model would (they
    are told apart by their system prompts); every other prompt as scripted."""

    answers = {DEFAULT_TEMPLATES["query-rewrite"].system: REWRITE,
               DEFAULT_TEMPLATES["query-decompose"].system: json.dumps(SUBQUERIES)}

    async def handle(self, request, body=None):
        body = await request.json()
        text = self.prompt_text(body)
        for system, answer in self.answers.items():
            if system in text:
                if not self.wants_stream(body):
                    return self.completion(answer, self.script)
                response = await self.open_stream(request, body)
                await self.write_token(response, answer)
                await self.write_end(response, body, self.script)
                return response
        return await super().handle(request, body)

    def answer_prompt(self) -> str:
        """The last prompt that was answered as scripted: the RAG answer's."""
        return self.prompt_text(self.last_body)


class RagStack:
    """Every processor both RAG services need, on a flow of their own."""

    def __init__(self, broker, llm: RagLlm, data_dir: Path) -> None:
        self.url, self.llm, self.data_dir = broker.url, llm, data_dir
        self.flow = f"rag-{uuid.uuid4().hex[:8]}"
        self.processors: list[Processor] = []
        self.bus = Bus(self.url)
        self.emit = Emitters(self.bus, self.flow).emit

    async def start(self) -> "RagStack":
        common = {"pulsar_url": self.url, "tg_flows": [self.flow], "tg_request_timeout": 30}
        stored = {"tg_data_dir": str(self.data_dir), "neo4j_uri": None, "qdrant_url": None}
        for processor in (
                Processor(CONFIG_SPEC, ConfigSettings(pulsar_url=self.url,
                                                tg_data_dir=str(self.data_dir))),
                Processor(spec_for("openai"), OpenAiSettings(
                    openai_base_url=self.llm.base_url, openai_api_key="test", **common)),
                Processor(PROMPT_SPEC, PromptSettings(**common)),
                Processor(EMBEDDINGS, EmbeddingsSettings(tg_embeddings="minilm", **common)),
                Processor(service_vectors.SPEC,
                          service_vectors.VectorStoreSettings(**common, **stored)),
                Processor(service_triples.SPEC,
                          service_triples.TriplesStoreSettings(**common, **stored)),
                Processor(stages.CHUNK_SPEC, stages.EmbeddingStageSettings(**common)),
                Processor(stages.ENTITY_SPEC, stages.EmbeddingStageSettings(**common)),
                Processor(document_rag.SPEC, ProcessorSettings(**common)),
                Processor(graph_rag.SPEC, ProcessorSettings(**common))):
            self.processors.append(processor)
            await processor.start()
        return self

    async def stop(self) -> None:
        await self.bus.close()
        for processor in reversed(self.processors):
            await processor.stop()

    async def requester(self, service: str) -> Requester:
        requester = Requester(self.bus, service, self.flow, f"test-{uuid.uuid4().hex[:8]}",
                              timeout=30)
        await requester.start()
        return requester

    async def frames(self, service: str, request: Record) -> list[RagResponse]:
        """Every record of the answer, errors included, in order."""
        requester = await self.requester(service)
        return [decode(RagResponse, data) async for batch in requester.frames(request)
                for data, _ in batch]

    async def vector(self, text: str) -> list[float]:
        embeddings = await self.requester("embeddings")
        return (await embeddings.call(EmbeddingsRequest(texts=[text]),
                                      EmbeddingsResponse)).vectors[0]

    async def load_chunks(self, user: str, collection: str,
                          documents: dict[tuple[str, str], list[str]]) -> None:
        """``{(document id, title): [chunk text]}`` in at the ``chunks`` stage; returns
        once the vector store serves them all."""
        count = 0
        for (id, title), texts in documents.items():
            document = DocumentRef(id=id, user=user, collection=collection, title=title)
            for index, text in enumerate(texts):
                await self.emit("chunks", Chunk(document=document, id=f"{id}/c{index}",
                                                index=index, text=text))
                count += 1
        store, probe = await self.requester("document-embeddings"), await self.vector("x")
        await until(lambda: store.call(DocumentEmbeddingsRequest(
            vector=probe, limit=1000, user=user, collection=collection),
            DocumentEmbeddingsResponse), lambda found: len(found.chunks) >= count)


async def until(produce, accept, timeout: float = 60.0):
    """``produce()`` again until ``accept`` holds for its result (the pipeline has
    stored what was sent), failing with the last result at the deadline."""
    deadline = time.monotonic() + timeout
    while not accept(result := await produce()):
        assert time.monotonic() < deadline, f"still {result!r} after {timeout} s"
        await asyncio.sleep(0.05)
    return result


@pytest.fixture
def data_dir():
    """Edge shards fsync on creation (~0.2 s on disk): use memory when there is some."""
    path = Path(tempfile.mkdtemp(prefix="tg-rag-",
                                 dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def llm():
    server = await RagLlm(Script(tokens=12)).start()
    yield server
    await server.stop()


@pytest.fixture
async def stack(broker, llm, data_dir):
    stack = await RagStack(broker, llm, data_dir).start()
    try:
        yield stack
    finally:
        await stack.stop()


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


@pytest.fixture
async def corpus(stack):
    await asyncio.gather(stack.load_chunks("alice", "acme", ACME),
                         stack.load_chunks("alice", "zeta", ZETA),
                         stack.load_chunks("bob", "acme", BOBS))
    return stack


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
