"""The store owners (processors ``triples-store`` and ``vector-store``) on a real
pulsar-lite broker: fed through their stage topics, queried through their services."""
import math
import random
import uuid

import pytest

from tests.support.handled import Handled
from trustgraph.base import Processor, ProcessorSpec, Requester, ServiceError, Timing
from trustgraph.base.stage import Emitters
from trustgraph.pubsub import Bus
from trustgraph.schema import (
    Chunk,
    ChunkTriples,
    ChunkVector,
    DocumentEmbeddingsRequest,
    DocumentEmbeddingsResponse,
    DocumentRef,
    DocumentRemoved,
    EntityVector,
    EntityVectors,
    GraphEmbeddingsRequest,
    GraphEmbeddingsResponse,
    Term,
    Triple,
    TriplesQueryRequest,
    TriplesQueryResponse,
    flow_topic,
)
from trustgraph.storage.triples import service as service_triples
from trustgraph.storage.vectors import service as service_vectors

I, L = Term.iri, Term.literal  # noqa: E741 (the wire's term kinds "i", "l")
DIM = 16


def vec(seed) -> list[float]:
    rng = random.Random(str(seed))
    v = [rng.uniform(-1, 1) for _ in range(DIM)]
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


def t(s, p, o) -> Triple:
    return Triple(s=I(f"http://ex/{s}"), p=I(f"http://ex/{p}"),
                  o=I(f"http://ex/{o}") if not o.startswith('"') else L(o.strip('"')))


def doc(id, user="trustgraph", collection="default", title="") -> DocumentRef:
    return DocumentRef(id=id, user=user, collection=collection, title=title)


class Stores:
    """Both store processors on one flow, an emitter and requesters for the test."""

    def __init__(self, broker, data_dir):
        self.broker, self.data_dir = broker, data_dir
        self.flow = f"stores-{uuid.uuid4().hex[:8]}"
        self.handled = Handled()
        self.processors = []

    async def start(self):
        for module, settings in ((service_triples, service_triples.TriplesStoreSettings),
                                 (service_vectors, service_vectors.VectorStoreSettings)):
            spec = ProcessorSpec(module.NAME, settings, self.handled.wrap(module.services))
            processor = Processor(spec, settings(pulsar_url=self.broker.url,
                                                 tg_flows=[self.flow],
                                                 tg_data_dir=str(self.data_dir)))
            await processor.start()
            self.processors.append(processor)
        self.bus = Bus(self.broker.url)
        self.emit = Emitters(self.bus, self.flow).emit
        self.requesters = {}
        for service in ("triples", "graph-embeddings", "document-embeddings"):
            requester = Requester(self.bus, service, self.flow, f"test-{uuid.uuid4().hex[:8]}",
                                  timing=Timing(timeout=20))
            await requester.start()
            self.requesters[service] = requester
        return self

    async def stop(self):
        await self.bus.close()
        for processor in self.processors:
            await processor.stop()

    async def triples(self, **request) -> list[Triple]:
        response = await self.requesters["triples"].call(
            TriplesQueryRequest(**request), TriplesQueryResponse)
        assert response.end_of_stream and response.error is None
        return response.response

    async def chunks(self, vector, **request):
        response = await self.requesters["document-embeddings"].call(
            DocumentEmbeddingsRequest(vector=vector, **request), DocumentEmbeddingsResponse)
        return response.chunks

    async def entities(self, vector, **request):
        response = await self.requesters["graph-embeddings"].call(
            GraphEmbeddingsRequest(vector=vector, **request), GraphEmbeddingsResponse)
        return response.entities


@pytest.fixture
async def stores(broker, data_dir):
    stores = await Stores(broker, data_dir).start()
    yield stores
    await stores.stop()


def chunk_vector(document: DocumentRef, index: int, text: str, seed=None) -> ChunkVector:
    chunk = Chunk(document=document, id=f"{document.id}/c{index}", index=index, text=text)
    return ChunkVector(chunk=chunk, vector=vec(seed if seed is not None else chunk.id))


# --- triples -------------------------------------------------------------------------


async def test_triples_are_stored_and_pattern_queried(stores):
    d = doc("d1")
    batch = [t("alice", "knows", "bob"), t("bob", "knows", "carol"),
             t("alice", "name", '"Alice"')]
    await stores.emit("triples", ChunkTriples(document=d, chunk_id="d1/c0", triples=batch))
    await stores.handled.until("triples", 1)
    assert set(await stores.triples()) == set(batch)
    assert set(await stores.triples(s=I("http://ex/alice"))) == {batch[0], batch[2]}
    assert await stores.triples(p=I("http://ex/knows"), o=I("http://ex/carol")) == [batch[1]]
    assert await stores.triples(o=L("Alice")) == [batch[2]]
    assert len(await stores.triples(limit=2)) == 2


async def test_triples_never_cross_users_or_collections(stores):
    scopes = [("alice", "work"), ("alice", "home"), ("bob", "work")]
    for user, collection in scopes:
        d = doc("same-doc", user, collection)
        await stores.emit("triples", ChunkTriples(document=d, chunk_id="same-doc/c0", triples=[
            t("shared", "in", "thing"), t(f"{user}-{collection}", "in", "thing")]))
    await stores.handled.until("triples", 3)
    for user, collection in scopes:
        found = await stores.triples(user=user, collection=collection)
        assert set(found) == {t("shared", "in", "thing"), t(f"{user}-{collection}", "in", "thing")}
        assert await stores.triples(user=user, collection=collection,
                                    s=I("http://ex/shared")) == [t("shared", "in", "thing")]
    assert await stores.triples() == []  # the default scope holds nothing
    assert await stores.triples(user="alice", collection="nobody") == []


async def test_a_redelivered_or_repeated_record_stores_one_copy(stores):
    record = ChunkTriples(document=doc("d2"), chunk_id="d2/c0",
                          triples=[t("x", "rel", "y"), t("y", "rel", "z")])
    stores.handled.fail_once.add("triples")  # the first delivery "crashes" after writing
    await stores.emit("triples", record)
    await stores.handled.until("triples", 1)  # the redelivery, 2 s later
    assert stores.handled.counts["triples:failed"] == 1
    await stores.emit("triples", record)  # and the same record loaded again
    await stores.handled.until("triples", 2)
    assert sorted(await stores.triples(), key=str) == sorted(record.triples, key=str)


async def test_document_removal_keeps_what_another_document_supports(stores):
    shared, own = t("a", "rel", "b"), t("c", "rel", "d")
    await stores.emit("triples", ChunkTriples(document=doc("d3"), chunk_id="d3/c0",
                                              triples=[shared, own]))
    await stores.emit("triples", ChunkTriples(document=doc("d4"), chunk_id="d4/c0",
                                              triples=[shared]))
    other_scope = doc("d3", "someone-else")
    await stores.emit("triples", ChunkTriples(document=other_scope, chunk_id="d3/c0",
                                              triples=[own]))
    await stores.handled.until("triples", 3)
    await stores.emit("document-removed", DocumentRemoved(document=doc("d3")))
    await stores.handled.until("document-removed", 2)  # triples-store and vector-store
    assert await stores.triples() == [shared]
    assert await stores.triples(user="someone-else") == [own]  # same id, other tenant


async def test_bad_triples_are_rejected_and_the_stage_goes_on(stores):
    topic = await stores.bus.producer(flow_topic("triples", stores.flow))
    await topic.send(b"not json at all")
    literal_subject = Triple(s=L("a literal"), p=I("http://ex/p"), o=L("x"))
    await stores.emit("triples", ChunkTriples(document=doc("d5"), chunk_id="d5/c0",
                                              triples=[literal_subject, t("ok", "p", "o")]))
    await stores.emit("triples", ChunkTriples(document=doc(""), chunk_id="c",
                                              triples=[t("no", "doc", "id")]))
    await stores.handled.until("triples", 2)  # garbage never reaches the handler
    assert await stores.triples() == [t("ok", "p", "o")]


async def test_bad_triples_queries_get_a_clear_error(stores):
    requester = stores.requesters["triples"]
    for bad, field in [({"s": L("x")}, "'s'"), ({"limit": 0}, "limit"),
                       ({"user": ""}, "user")]:
        with pytest.raises(ServiceError) as failure:
            await requester.call(TriplesQueryRequest.model_construct(**bad), TriplesQueryResponse)
        assert failure.value.error.type == "bad-request"
        assert field in failure.value.error.message
    assert await stores.triples() == []  # and the service still answers


# --- vectors -------------------------------------------------------------------------


async def test_chunk_vectors_are_searched_nearest_first(stores):
    d = doc("v1", title="Vectors")
    for i in range(5):
        await stores.emit("chunk-vectors", chunk_vector(d, i, f"text {i}"))
    await stores.handled.until("chunk-vectors", 5)
    found = await stores.chunks(vec("v1/c3"), limit=3)
    assert [c.chunk_id for c in found][0] == "v1/c3"
    assert len(found) == 3 and found[0].score == pytest.approx(1.0, abs=1e-4)
    assert found[0].score >= found[1].score >= found[2].score
    assert (found[0].text, found[0].document_id, found[0].title) == ("text 3", "v1", "Vectors")
    # the wire shape of PROTOCOL §2
    wire = DocumentEmbeddingsResponse(chunks=found).model_dump(exclude_none=True)
    assert {"chunk_id", "text", "score"} <= set(wire["chunks"][0])


async def test_entity_vectors_are_searched_nearest_first(stores):
    entities = [EntityVector(entity=I(f"http://ex/e{i}"), label=f"e{i}", vector=vec(f"e{i}"))
                for i in range(4)]
    await stores.emit("entity-vectors", EntityVectors(document=doc("v2"), entities=entities))
    await stores.handled.until("entity-vectors", 1)
    found = await stores.entities(vec("e2"), limit=2)
    assert found[0].entity == I("http://ex/e2") and found[0].label == "e2"
    assert found[0].score == pytest.approx(1.0, abs=1e-4) and len(found) == 2
    wire = GraphEmbeddingsResponse(entities=found).model_dump(exclude_none=True)
    assert wire["entities"][0]["entity"] == {"t": "i", "i": "http://ex/e2"}


async def test_vectors_never_cross_users_or_collections(stores):
    scopes = [("alice", "work"), ("alice", "home"), ("bob", "work")]
    for user, collection in scopes:
        d = doc("same-doc", user, collection)
        # the same chunk id and the same vector in every scope, with its own text
        await stores.emit("chunk-vectors", chunk_vector(d, 0, f"{user}/{collection}", seed=1))
        await stores.emit("entity-vectors", EntityVectors(document=d, entities=[
            EntityVector(entity=I(f"http://ex/{user}-{collection}"), label="x", vector=vec(1))]))
    await stores.handled.until("chunk-vectors", 3)
    await stores.handled.until("entity-vectors", 3)
    for user, collection in scopes:
        chunks = await stores.chunks(vec(1), user=user, collection=collection, limit=100)
        assert [c.text for c in chunks] == [f"{user}/{collection}"]
        entities = await stores.entities(vec(1), user=user, collection=collection, limit=100)
        assert [e.entity for e in entities] == [I(f"http://ex/{user}-{collection}")]
    assert await stores.chunks(vec(1), limit=100) == []  # the default scope
    assert await stores.entities(vec(1), user="bob", collection="home") == []


async def test_vector_writes_are_idempotent_under_redelivery(stores):
    d = doc("v3")
    record = chunk_vector(d, 0, "once")
    entities = EntityVectors(document=d, entities=[
        EntityVector(entity=I("http://ex/once"), label="once", vector=vec("once"))])
    # the first deliveries "crash" after writing, and are redelivered 2 s later
    stores.handled.fail_once.update({"chunk-vectors", "entity-vectors"})
    await stores.emit("chunk-vectors", record)
    await stores.emit("entity-vectors", entities)
    await stores.handled.until("chunk-vectors", 1)
    await stores.handled.until("entity-vectors", 1)
    await stores.emit("chunk-vectors", record)  # and the same records loaded again
    await stores.emit("entity-vectors", entities)
    await stores.handled.until("chunk-vectors", 2)
    await stores.handled.until("entity-vectors", 2)
    assert stores.handled.counts["chunk-vectors:failed"] == 1
    assert stores.handled.counts["entity-vectors:failed"] == 1
    assert [c.chunk_id for c in await stores.chunks(vec(0), limit=100)] == ["v3/c0"]
    assert [e.label for e in await stores.entities(vec(0), limit=100)] == ["once"]


async def test_document_removal_removes_its_vectors(stores):
    kept, gone = doc("keep"), doc("gone")
    await stores.emit("chunk-vectors", chunk_vector(kept, 0, "kept"))
    await stores.emit("chunk-vectors", chunk_vector(gone, 0, "gone"))
    shared = EntityVector(entity=I("http://ex/shared"), label="shared", vector=vec("s"))
    only = EntityVector(entity=I("http://ex/only"), label="only", vector=vec("o"))
    await stores.emit("entity-vectors", EntityVectors(document=kept, entities=[shared]))
    await stores.emit("entity-vectors", EntityVectors(document=gone, entities=[shared, only]))
    await stores.emit("triples", ChunkTriples(document=gone, chunk_id="gone/c0",
                                              triples=[t("only", "in", "gone")]))
    await stores.handled.until("chunk-vectors", 2)
    await stores.handled.until("entity-vectors", 2)
    await stores.handled.until("triples", 1)
    await stores.emit("document-removed", DocumentRemoved(document=gone))
    await stores.handled.until("document-removed", 2)
    assert [c.text for c in await stores.chunks(vec(0), limit=10)] == ["kept"]
    assert [e.label for e in await stores.entities(vec(0), limit=10)] == ["shared"]
    assert await stores.triples() == []


async def test_bad_vector_records_are_rejected_and_the_stage_goes_on(stores):
    d = doc("v4")
    await stores.emit("chunk-vectors", chunk_vector(d, 0, "first"))  # sets the dimension
    await stores.handled.until("chunk-vectors", 1)
    wrong_size = chunk_vector(d, 1, "short")
    wrong_size = wrong_size.model_copy(update={"vector": [1.0, 0.0]})
    empty = wrong_size.model_copy(update={"vector": []})
    no_scope = chunk_vector(doc("v4", user=""), 2, "nobody's")
    for bad in (wrong_size, empty, no_scope):
        await stores.emit("chunk-vectors", bad)
    await stores.emit("chunk-vectors", chunk_vector(d, 3, "last"))
    await stores.handled.until("chunk-vectors", 5)
    assert sorted(c.text for c in await stores.chunks(vec(0), limit=10)) == ["first", "last"]


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
async def test_bad_vector_queries_get_a_clear_error(stores):
    await stores.emit("chunk-vectors", chunk_vector(doc("v5"), 0, "x"))
    await stores.handled.until("chunk-vectors", 1)
    requester = stores.requesters["document-embeddings"]
    cases = [({"vector": []}, "vector"), ({"vector": [1.0] * DIM, "limit": -1}, "limit"),
             ({"vector": [1.0, 2.0]}, "dim"), ({"vector": "abc"}, "vector")]
    for bad, field in cases:
        with pytest.raises(ServiceError) as failure:
            await requester.call(DocumentEmbeddingsRequest.model_construct(**bad),
                                 DocumentEmbeddingsResponse)
        assert failure.value.error.type == "bad-request", failure.value.error
        assert field in failure.value.error.message
    with pytest.raises(ServiceError) as failure:
        await stores.requesters["graph-embeddings"].call(
            GraphEmbeddingsRequest.model_construct(limit=3), GraphEmbeddingsResponse)
    assert failure.value.error.type == "bad-request" and "vector" in failure.value.error.message
    assert len(await stores.chunks(vec(0))) == 1  # and the service still answers

