"""graph-rag over a real pulsar-lite broker, with the processors of
test_document_rag_bus.py (tests/support/rag_processors.py): the triples store
(SQLite) serving ``subgraph``, entity vectors from the real embedding model in Qdrant
Edge, a local OpenAI-format server.

The graph goes in through the pipeline's ``triples`` and ``entities`` stages as LLM
extraction sends it (entity and relation IRIs with their labels), so the statements
the LLM is given can be checked word for word.
"""
import asyncio

import pytest
import pytest_asyncio

from tests.support.openai_server import PROMPT_TOKENS, expected_text
from tests.support.rag_processors import RagProcessors, rag_processors
from tests.support.waiting import eventually
from trustgraph.extract.vocabulary import LABEL, entity_iri, relation_iri
from trustgraph.schema import (
    ChunkEntities,
    ChunkTriples,
    DocumentRef,
    EntityContext,
    GraphEmbeddingsRequest,
    GraphEmbeddingsResponse,
    GraphRagRequest,
    Term,
    Triple,
    TriplesQueryRequest,
    TriplesQueryResponse,
)

Fact = tuple[str, str, str]  # subject, predicate, object ('"…"' for a literal value)


def extracted(document: DocumentRef, chunk_id: str, facts: list[Fact]
              ) -> tuple[ChunkTriples, ChunkEntities]:
    """What LLM extraction sends for a chunk stating ``facts``."""
    triples: dict[Triple, None] = {}
    entities: dict[Term, str] = {}

    def named(name: str, iri: str) -> Term:
        term = Term.iri(iri)
        triples.setdefault(Triple(s=term, p=Term.iri(LABEL), o=Term.literal(name)))
        return term

    for s, p, o in facts:
        subject = named(s, entity_iri(s))
        entities[subject] = s
        if o.startswith('"'):
            object = Term.literal(o.strip('"'))
        else:
            object = named(o, entity_iri(o))
            entities[object] = o
        triples.setdefault(Triple(s=subject, p=named(p, relation_iri(p)), o=object))
    return (ChunkTriples(document=document, chunk_id=chunk_id, triples=list(triples)),
            ChunkEntities(document=document, chunk_id=chunk_id, entities=[
                EntityContext(entity=e, label=label) for e, label in entities.items()]))


async def load_graph(rag: RagProcessors, user: str, collection: str,
                     documents: dict[str, list[list[Fact]]]) -> None:
    """``{document id: [facts of each chunk]}`` in at the pipeline's stages; returns
    once the stores serve every triple and entity vector."""
    triples, entities = set(), set()
    for id, chunks in documents.items():
        document = DocumentRef(id=id, user=user, collection=collection)
        for index, facts in enumerate(chunks):
            record, named = extracted(document, f"{id}/c{index}", facts)
            await rag.emit("triples", record)
            await rag.emit("entities", named)
            triples |= set(record.triples)
            entities |= {e.entity for e in named.entities}
    store, query = await rag.requester("triples"), TriplesQueryRequest(user=user,
                                                                        collection=collection)
    await eventually(lambda: store.call(query, TriplesQueryResponse),
                     f"{len(triples)} triples stored in {user}/{collection}",
                     accept=lambda found: len(found.response) >= len(triples), timeout=60)
    vectors, probe = await rag.requester("graph-embeddings"), await rag.vector("x")
    search = GraphEmbeddingsRequest(vector=probe, limit=1000, user=user, collection=collection)
    await eventually(lambda: vectors.call(search, GraphEmbeddingsResponse),
                     f"{len(entities)} entity vectors stored in {user}/{collection}",
                     accept=lambda found: len(found.entities) >= len(entities), timeout=60)


ACME = {
    "acme-history": [
        [("Acme Rockets", "was founded by", "Ada Quill"),
         ("Acme Rockets", "was founded in", '"1952"')],
        [("Ada Quill", "was born in", "Leeds")]],
    "acme-catalogue": [[("Roadrunner engine", "is made by", "Acme Rockets")]],
}
# The same entities, other facts, in another collection.
ZETA = {"zeta-notes": [[("Acme Rockets", "was founded by", "Bruno Rossi"),
                        ("Acme Rockets", "was founded in", '"1961"')]]}
QUESTION = "Who founded Acme Rockets?"


pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rag(broker, module_data_dir):
    """One set of processors for the module (their start and stop cost seconds); no
    test changes the graphs or the LLM's script."""
    async with rag_processors(broker, module_data_dir) as rag:
        yield rag


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def graphs(rag):
    await asyncio.gather(load_graph(rag, "alice", "acme", ACME),
                         load_graph(rag, "alice", "zeta", ZETA))
    return rag


def ask(**request) -> GraphRagRequest:
    return GraphRagRequest(**{"query": QUESTION, "user": "alice", "collection": "acme",
                              **request})


async def test_streaming_cites_the_triples_used_then_answers(graphs):
    metadata, *deltas, final = await graphs.frames("graph-rag", ask(streaming=True))
    assert metadata.message_type == "metadata" and not metadata.end_of_stream
    statements = {s.text: s for s in metadata.sources}
    founded = statements["Acme Rockets | was founded by | Ada Quill"]
    assert (founded.s, founded.p, founded.o) == (
        Term.iri(entity_iri("Acme Rockets")), Term.iri(relation_iri("was founded by")),
        Term.iri(entity_iri("Ada Quill")))
    assert (founded.id, founded.document_id) == ("acme-history/c0", "acme-history")
    assert statements["Acme Rockets | was founded in | 1952"].o == Term.literal("1952")
    assert statements["Roadrunner engine | is made by | Acme Rockets"].document_id == \
        "acme-catalogue"
    assert not [text for text in statements if "| label |" in text or LABEL in text]
    assert "".join(d.chunk for d in deltas) == expected_text(12)
    assert (final.chunk, final.end_of_stream, final.end_of_session) == ("", True, True)
    assert final.sources == metadata.sources
    assert (final.in_token, final.out_token, final.model) == (PROMPT_TOKENS, 12, "fake-gpt")
    prompt = graphs.llm.answer_prompt()  # every cited statement was given to the LLM
    assert all(f"- {text}\n" in prompt for text in statements)
    assert f"Question: {QUESTION}" in prompt


@pytest.mark.parametrize("collection, documents, absent", [
    ("acme", {"acme-history", "acme-catalogue"}, ["Bruno Rossi", "1961"]),
    ("zeta", {"zeta-notes"}, ["Ada Quill", "1952"]),
])
async def test_a_question_in_one_collection_never_cites_another(graphs, collection,
                                                                documents, absent):
    [record] = await graphs.frames("graph-rag", ask(collection=collection))
    assert record.response == expected_text(12)
    assert record.sources and {s.document_id for s in record.sources} == documents
    prompt = graphs.llm.answer_prompt()
    assert not [text for text in absent if text in prompt]


async def test_the_subgraph_size_limit_bounds_the_statements(graphs):
    [whole] = await graphs.frames("graph-rag", ask())
    [record] = await graphs.frames("graph-rag", ask(max_subgraph_size=3))
    assert len(record.sources) <= 3 < len(whole.sources) == 4


async def test_a_small_subgraph_budget_still_gives_statements(graphs):
    [record] = await graphs.frames("graph-rag", ask(max_subgraph_size=2))
    assert record.sources


async def test_an_empty_graph_is_answered_from_no_statements(graphs):
    metadata, *_, final = await graphs.frames("graph-rag", ask(
        collection="nothing-here", streaming=True))
    assert metadata.sources == [] and final.sources == [] and final.end_of_stream
    assert "(no statements were found)" in graphs.llm.answer_prompt()
