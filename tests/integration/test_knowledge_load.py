"""``knowledge-load``: triples straight into the triples store (served by the
triples-store processor), and vectors for their labelled entities through the
``entities`` stage, the entity-embeddings processor and the vector store; through
the gateway and the client library, on a real broker."""
import aiohttp
import pytest
import pytest_asyncio

from tests.support.ingest_stack import IngestStack, ask, vector_of
from tests.support.waiting import eventually
from trustgraph.api import AsyncTrustGraph
from trustgraph.ingest.embedding_stages import ENTITY_SPEC, EmbeddingStageSettings, entity_text
from trustgraph.schema import RDFS_LABEL, DocumentRef, DocumentRemoved, EntityContext, Term, Triple
from trustgraph.storage.triples.service import DEFINITIONS, labelled_entities

pytestmark = pytest.mark.asyncio(loop_scope="module")

I, L = Term.iri, Term.literal  # noqa: E741 (the wire's term kinds "i", "l")
SKOS_DEFINITION, RDFS_COMMENT = DEFINITIONS
KNOWS = "http://ex/knows"


def ex(name: str) -> Term:
    return I(f"http://ex/{name}")


GRAPH = [
    Triple(s=ex("alice"), p=I(RDFS_LABEL), o=L("Alice")),
    Triple(s=ex("alice"), p=I(SKOS_DEFINITION), o=L("a cryptographer")),
    Triple(s=ex("alice"), p=I(KNOWS), o=ex("bob")),
    Triple(s=ex("bob"), p=I(RDFS_LABEL), o=L("Bob")),
    Triple(s=ex("bob"), p=I(KNOWS), o=ex("carol")),  # carol has no label: no vector
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(broker, tmp_path_factory):
    stack = IngestStack(broker, tmp_path_factory.mktemp("kload"),
                        extra=[(ENTITY_SPEC, EmbeddingStageSettings)])
    try:
        yield await stack.start()
    finally:
        await stack.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def client(stack):
    async with AsyncTrustGraph(stack.url) as client:
        yield client


@pytest_asyncio.fixture(loop_scope="module")
async def ws(stack):
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(stack.url + "api/v1/socket") as ws:
            yield ws


def keys(triples: list[dict]) -> set[str]:
    return {Triple.model_validate(t).model_dump_json() for t in triples}


async def test_triples_are_stored_once_and_labelled_entities_get_vectors(stack, client):
    scope = {"user": "kl", "collection": "people", "flow": stack.flow}
    loaded = await client.knowledge_load(GRAPH + GRAPH[:2], "people.ttl", **scope)
    assert loaded == {"triples": 5, "entities": 2}
    # Stored before the answer: no waiting for the triples.
    assert keys(await client.triples(**scope)) == keys([t.model_dump() for t in GRAPH])
    assert await client.knowledge_load(GRAPH, "people.ttl", batch=2, **scope) == {
        "triples": 5, "entities": 2}
    assert len(await client.triples(**scope)) == 5

    async def both_vectors():
        found = await client.graph_embeddings(vector_of("Alice: a cryptographer"), **scope)
        return found if len(found) == 2 else None

    alice, bob = await eventually(both_vectors, "vectors for Alice and Bob")
    assert (alice["entity"], alice["label"]) == ({"t": "i", "i": "http://ex/alice"}, "Alice")
    assert alice["score"] == pytest.approx(1.0, abs=1e-4)
    assert bob["label"] == "Bob"
    assert await client.triples(user="kl", collection="others", flow=stack.flow) == []


async def test_batches_report_progress_and_add_up(stack, client):
    triples = [Triple(s=ex(f"n{i}"), p=I(RDFS_LABEL), o=L(f"node {i}")) for i in range(25)]
    seen: list[int] = []
    loaded = await client.knowledge_load(triples, "nodes.nt", batch=10, progress=seen.append,
                                         collection="nodes", flow=stack.flow)
    assert seen == [10, 10, 5] and loaded == {"triples": 25, "entities": 25}
    assert len(await client.triples(collection="nodes", flow=stack.flow)) == 25


async def test_removing_the_source_removes_its_triples(stack, client):
    scope = {"user": "kl", "collection": "removal", "flow": stack.flow}
    await client.knowledge_load(GRAPH, "one.ttl", **scope)
    await client.knowledge_load(GRAPH[:1], "two.ttl", **scope)
    await stack.emit("document-removed", DocumentRemoved(
        document=DocumentRef(id="one.ttl", user="kl", collection="removal")))

    async def only_the_shared_triple():
        found = await client.triples(**scope)
        return found if len(found) == 1 else None

    [left] = await eventually(only_the_shared_triple, "one.ttl's triples to go")
    assert keys([left]) == keys([GRAPH[0].model_dump()])


@pytest.mark.parametrize("request_, words", [
    ({"triples": []}, "request.source: Field required"),
    ({"source": "", "triples": []}, "request.source: String should have at least 1"),
    ({"source": "s"}, "request.triples: Field required"),
    ({"source": "s", "triples": [{"s": {"t": "l", "v": "x"}, "p": {"t": "i", "i": "p"},
                                  "o": {"t": "l", "v": "y"}}]},
     "request.triples: Value error, triple 0: subject and predicate must be IRIs"),
    ({"source": "s", "triples": [{"s": {"t": "i"}, "p": {"t": "i", "i": "p"},
                                  "o": {"t": "l", "v": "y"}}]},
     "request.triples.0.s: Value error, an IRI term needs 'i'"),
    ({"source": "s", "collection": "", "triples": []},
     "request.collection: String should have at least 1"),
    ({"source": "s", "triples": [{"s": {"t": "i", "i": "a"}, "p": {"t": "i", "i": "p"},
                                  "o": {"t": "i", "i": "b"}}] * 10_001},
     "request.triples: List should have at most 10000 items"),
])
async def test_bad_loads_are_refused_naming_the_field(stack, ws, request_, words):
    frame = await ask(ws, "knowledge-load", request_, stack.flow)
    assert frame["error"]["type"] == "bad-request", frame
    assert frame["error"]["message"].startswith(words), frame["error"]["message"]


async def test_an_empty_load_stores_nothing(stack, ws):
    frame = await ask(ws, "knowledge-load", {"source": "s", "triples": []}, stack.flow)
    assert frame["response"] == {"triples": 0, "entities": 0, "end_of_stream": True}


async def test_labelled_entities_take_the_first_label_and_the_best_definition():
    a, b, c = ex("a"), ex("b"), ex("c")
    triples = [Triple(s=a, p=I(RDFS_COMMENT), o=L("a comment")),
               Triple(s=a, p=I(RDFS_LABEL), o=L("A")),
               Triple(s=a, p=I(RDFS_LABEL), o=L("second label")),
               Triple(s=a, p=I(SKOS_DEFINITION), o=L("the definition")),
               Triple(s=b, p=I(RDFS_LABEL), o=L("  ")),          # blank: no entity
               Triple(s=c, p=I(RDFS_LABEL), o=ex("not-a-literal")),
               Triple(s=c, p=I(RDFS_COMMENT), o=L("C only has a comment"))]
    assert labelled_entities(triples) == [
        EntityContext(entity=a, label="A", definition="the definition")]
    assert entity_text("A", "the definition") == "A: the definition"
    assert labelled_entities([Triple(s=b, p=I(RDFS_LABEL), o=L("B")),
                              Triple(s=b, p=I(RDFS_COMMENT), o=L("about B"))]) == [
        EntityContext(entity=b, label="B", definition="about B")]
