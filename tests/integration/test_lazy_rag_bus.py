"""lazy-rag over a real pulsar-lite broker: the RAG stack of test_document_rag_bus.py
(config, prompt, text-completion → a local OpenAI-format server, the real embedding
model, SQLite triples, Qdrant Edge vectors), the LLM-free keyphrase extractor, and
the lazy-rag processor. The corpus goes in at the pipeline's ``chunks`` stage, as the
chunker sends it, and is indexed with no LLM at all.

One stack serves the module; each test asks in collections of its own.
"""
import uuid

import pytest
import pytest_asyncio

from tests.support.openai_server import PROMPT_TOKENS, Script, expected_text
from tests.support.rag_processors import RagLlm, RagProcessors
from tests.support.waiting import eventually
from trustgraph.base import Processor
from trustgraph.extract.keyphrase import KeyphraseExtractor
from trustgraph.extract.service import SPEC as EXTRACT
from trustgraph.extract.service import ExtractSettings
from trustgraph.extract.vocabulary import MENTIONED_IN, entity_iri
from trustgraph.retrieval.lazy_rag.service import SPEC as LAZY_RAG
from trustgraph.retrieval.lazy_rag.settings import LazyRagSettings
from trustgraph.schema import (
    Chunk,
    CollectionDeleteRequest,
    CollectionDeleteResponse,
    DocumentRef,
    GraphVersionRequest,
    GraphVersionResponse,
    LazyRagExpandRequest,
    LazyRagExpandResponse,
    LazyRagRequest,
    LazyRagResponse,
    LazyRagStatusRequest,
    LazyRagStatusResponse,
    Term,
    TriplesQueryRequest,
    TriplesQueryResponse,
    decode,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

SUMMARY_MODEL = "summary-model"
ACME = {"acme-history": [
    "Acme Rockets was founded in 1952 by Ada Quill in Tucson, Arizona.",
    "In 1970 Acme Rockets moved its factory to Houston, where it builds the "
    "Roadrunner engine."],
    "acme-catalogue": ["The Roadrunner engine burns liquid oxygen and kerosene."]}
MUSEUM = {"museum-notes": [
    "Ada Quill later opened a rocket museum in Leeds, which displays the first "
    "Roadrunner engine."]}
QUESTION = "Who founded Acme Rockets?"


class LazyStack(RagProcessors):
    async def start(self) -> "LazyStack":
        await super().start()
        common = {"pulsar_url": self.url, "tg_flows": [self.flow], "tg_request_timeout": 30}
        for processor in (
                Processor(EXTRACT, ExtractSettings(tg_extractor="keyphrase", **common)),
                Processor(LAZY_RAG, LazyRagSettings(
                    tg_data_dir=str(self.data_dir), lazy_rag_summary_model=SUMMARY_MODEL,
                    **common))):
            self.processors.append(processor)
            await processor.start()
        return self

    async def lazy(self, service: str, request, model=LazyRagResponse) -> list:
        requester = await self.requester(service)
        return [decode(model, data) async for batch in requester.frames(request)
                for data, _ in batch]

    async def load(self, user: str, collection: str, documents: dict[str, list[str]]) -> int:
        """Chunks in at the ``chunks`` stage; returns once the triples store and the
        entity vectors hold what extraction made of them: the new graph version."""
        store = await self.requester("triples")

        async def mentions_stored() -> int:
            found = await store.call(TriplesQueryRequest(
                user=user, collection=collection, p=Term.iri(MENTIONED_IN)),
                TriplesQueryResponse)
            return len(found.response)

        phrases = KeyphraseExtractor()
        mentions = await mentions_stored()  # of the documents loaded before these
        for id, texts in documents.items():
            document = DocumentRef(id=id, user=user, collection=collection, title=id)
            for index, text in enumerate(texts):
                await self.emit("chunks", Chunk(document=document, id=f"{id}/c{index}",
                                                index=index, text=text))
                mentions += len(phrases.key_phrases(text))
        await eventually(mentions_stored, "the mentions stored",
                         accept=lambda stored: stored >= mentions)
        versions = await self.requester("graph-version")
        return (await versions.call(GraphVersionRequest(user=user, collection=collection),
                                    GraphVersionResponse)).version


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(broker, tmp_path_factory):
    llm = await RagLlm(Script(tokens=12)).start()
    stack = await LazyStack(broker, llm, tmp_path_factory.mktemp("lazy")).start()
    try:
        yield stack
    finally:
        await stack.stop()
        await llm.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def acme(stack):
    """A fresh collection holding the Acme corpus: (user, collection)."""
    scope = "alice", f"acme-{uuid.uuid4().hex[:6]}"
    await stack.load(*scope, ACME)
    return scope


def ask(scope, query: str = QUESTION, **request) -> LazyRagRequest:
    return LazyRagRequest(query=query, user=scope[0], collection=scope[1], **request)


async def test_streams_sources_first_then_the_summary_then_the_subgraph(stack, acme):
    metadata, *deltas, final = await stack.lazy("lazy-rag", ask(acme, streaming=True))
    assert metadata.message_type == "metadata" and metadata.sources
    assert not metadata.end_of_stream and metadata.entities is None
    assert "".join(d.chunk for d in deltas) == expected_text(12)
    assert all(d.message_type == "chunk" and not d.end_of_stream for d in deltas)
    assert (final.chunk, final.end_of_stream, final.end_of_session) == ("", True, True)
    assert final.sources == metadata.sources and final.summary_error is None
    labels = {e.label: e for e in final.entities}
    assert labels["Acme Rockets"].hops == 0 and labels["Acme Rockets"].score == 1.0
    assert "Ada Quill" in labels
    assert any(r.s.i == entity_iri("Acme Rockets") or r.o.i == entity_iri("Acme Rockets")
               for r in final.relationships)
    assert final.communities and final.community_cache == "miss"
    assert final.confidence > 0.5 and final.missing_info == []
    assert final.generation_time_ms > 0
    assert (final.in_token, final.out_token) == (PROMPT_TOKENS, 12)
    assert stack.llm.last_body["model"] == SUMMARY_MODEL  # LAZY_RAG_SUMMARY_MODEL
    prompt = stack.llm.answer_prompt()
    assert "<graph-data>" in prompt and "- Acme Rockets" in prompt


async def test_one_record_without_streaming(stack, acme):
    [record] = await stack.lazy("lazy-rag", ask(acme))
    assert record.response == expected_text(12) and record.end_of_stream
    assert record.entities and record.confidence > 0.5


async def test_an_unanswerable_question_says_what_is_missing(stack, acme):
    [record] = await stack.lazy("lazy-rag", ask(
        acme, "Who founded Acme Rockets, and what does plutonium cost?"))
    assert record.missing_info == ["what does plutonium cost?"]
    assert "- what does plutonium cost?" in stack.llm.answer_prompt()
    [covered] = await stack.lazy("lazy-rag", ask(acme))
    assert record.confidence < covered.confidence


async def test_communities_are_recomputed_after_a_new_document_only_when_asked(stack, acme):
    status = await stack.requester("lazy-rag-status")

    async def cache_state():
        [state] = (await status.call(LazyRagStatusRequest(user=acme[0], collection=acme[1]),
                                     LazyRagStatusResponse)).community_cache
        return state

    assert (await cache_state()).cached_version is None  # loading computed nothing
    [first] = await stack.lazy("lazy-rag", ask(acme))
    assert first.community_cache == "miss" and (await cache_state()).fresh
    [again] = await stack.lazy("lazy-rag", ask(acme))
    assert again.community_cache == "hit"
    version = await stack.load(*acme, MUSEUM)
    state = await cache_state()
    assert not state.fresh and state.graph_version == version > state.cached_version
    [after] = await stack.lazy("lazy-rag", ask(acme, "Where is the rocket museum?"))
    assert after.community_cache == "miss"
    state = await cache_state()
    assert state.fresh and state.cached_version == version
    assert "rocket museum" in {e.label for e in after.entities}


async def test_a_deleted_collections_communities_are_forgotten(stack, acme):
    """LazyRAG's part of deleting a collection (``collection-communities``, asked by
    collection-management's delete): its cached communities go, no other's."""
    kept = "alice", f"kept-{uuid.uuid4().hex[:6]}"
    await stack.load(*kept, MUSEUM)
    for scope in (acme, kept):
        [answer] = await stack.lazy("lazy-rag-expand", LazyRagExpandRequest(
            query=QUESTION, user=scope[0], collection=scope[1]), LazyRagExpandResponse)
        assert answer.communities
    status = await stack.requester("lazy-rag-status")

    async def cached() -> set[str]:
        states = (await status.call(LazyRagStatusRequest(user="alice"),
                                    LazyRagStatusResponse)).community_cache
        return {state.collection for state in states if state.cached_version is not None}

    assert {acme[1], kept[1]} <= await cached()
    delete = await stack.requester("collection-communities")
    request = CollectionDeleteRequest(user=acme[0], collection=acme[1])
    removed = (await delete.call(request, CollectionDeleteResponse)).removed
    assert removed["communities"] > 0 and list(removed) == ["communities"]
    assert acme[1] not in await cached() and kept[1] in await cached()
    again = await delete.call(request, CollectionDeleteResponse)  # safe to repeat
    assert again.removed == {"communities": 0}


@pytest.mark.parametrize("user, collection", [("bob", None), ("alice", "elsewhere")])
async def test_another_tenants_question_finds_nothing(stack, acme, user, collection):
    scope = user, collection or acme[1]
    metadata, *_, final = await stack.lazy("lazy-rag", ask(scope, streaming=True))
    assert metadata.sources == [] and final.sources == []
    assert final.entities == [] and final.relationships == [] and final.confidence == 0.0
    assert final.missing_info
    data = stack.llm.answer_prompt().split("<graph-data>\n")[1].split("</graph-data>")[0]
    assert "Acme" not in data and "(no entities were found)" in data


async def test_an_llm_failure_still_answers_with_the_subgraph(stack, acme):
    records = await stack.lazy("lazy-rag", ask(acme, "Who founded Acme Rockets? [status=400]",
                                               streaming=True))
    final = records[-1]
    assert final.error is None and final.end_of_stream
    assert final.summary_error.type == "llm-error" and "400" in final.summary_error.message
    assert final.entities and final.relationships and final.confidence > 0


async def test_expand_answers_the_subgraph_without_the_llm(stack, acme):
    asked = stack.llm.stats.requests
    [record] = await stack.lazy("lazy-rag-expand", LazyRagExpandRequest(
        query=QUESTION, user=acme[0], collection=acme[1], max_entities=3, max_hops=1),
        LazyRagExpandResponse)
    assert len(record.entities) == 3 and record.entities[0].label == "Acme Rockets"
    assert record.confidence > 0.5 and record.communities
    assert stack.llm.stats.requests == asked


async def test_status_gives_the_settings_in_force(stack):
    [record] = await stack.lazy("lazy-rag-status", LazyRagStatusRequest(user="nobody"),
                                LazyRagStatusResponse)
    assert (record.enabled, record.max_hops, record.max_entities, record.use_communities,
            record.summary_model) == (True, 2, 50, True, SUMMARY_MODEL)
    assert record.community_cache == []
