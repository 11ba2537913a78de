"""The embedding stages (processors ``chunk-embeddings`` and ``entity-embeddings``) on a
real pulsar-lite broker: first against a scripted embeddings service (to see every
request and inject failures), then end to end with the real embeddings service
(all-MiniLM-L6-v2) and the real vector store, queried through its services."""
import uuid

import pytest

from tests.support.handled import Handled
from tests.support.waiting import eventually
from trustgraph.base import (
    TIMING,
    HandledError,
    Processor,
    ProcessorSettings,
    ProcessorSpec,
    Requester,
    Service,
    Stage,
    Timing,
    delivery,
)
from trustgraph.base.stage import Emitters
from trustgraph.embeddings.provider import EmbeddingsSettings
from trustgraph.embeddings.service import SPEC as EMBEDDINGS_SPEC
from trustgraph.ingest import embedding_stages as stages
from trustgraph.pubsub import Bus
from trustgraph.schema import (
    Chunk,
    ChunkCountRequest,
    ChunkCountResponse,
    ChunkEntities,
    ChunkSet,
    ChunkVector,
    DocumentEmbeddingsRequest,
    DocumentEmbeddingsResponse,
    DocumentRef,
    EmbeddingsRequest,
    EmbeddingsResponse,
    EntityContext,
    EntityVectors,
    GraphEmbeddingsRequest,
    GraphEmbeddingsResponse,
    Term,
)
from trustgraph.storage.vectors import service as service_vectors

I = Term.iri  # noqa: E741 (the wire's term kind "i")
DIM = 384


class ScriptedEmbeddings:
    """An embeddings service whose vectors encode the text's length; it records every
    request and fails as told."""

    def __init__(self):
        self.requests: list[list[str]] = []
        self.fail: list[HandledError] = []  # raised by the next requests, in order

    async def handle(self, request: EmbeddingsRequest, ctx) -> EmbeddingsResponse:
        texts = request.inputs()
        self.requests.append(texts)
        if self.fail:
            raise self.fail.pop(0)
        # full-precision values, as a real model's: ~8 KB of JSON per vector
        return EmbeddingsResponse(vectors=[[float(len(t))] + [0.12345678901234567] * (DIM - 1)
                                           for t in texts], end_of_stream=True)


class Pipeline:
    """The two embedding processors on a fresh flow, their outputs collected."""

    def __init__(self, broker, embeddings_spec, embeddings_settings=None,
                 timing: Timing = TIMING, **settings):
        self.broker = broker
        self.timing = timing  # the stages' request protocol (TIMING: the product's)
        self.flow = f"emb-stages-{uuid.uuid4().hex[:8]}"
        self.embeddings_spec = embeddings_spec
        self.embeddings_settings = embeddings_settings
        self.settings = settings
        self.handled = Handled()
        self.chunk_vectors: list[ChunkVector] = []
        self.entity_vectors: list[EntityVectors] = []
        self.processors: list[Processor] = []

    async def _run(self, spec, settings):
        processor = Processor(spec, settings, timing=self.timing)
        await processor.start()
        self.processors.append(processor)

    async def start(self, collect=True):
        base = dict(pulsar_url=self.broker.url, tg_flows=[self.flow])
        if self.embeddings_spec is not None:
            settings = self.embeddings_settings or ProcessorSettings
            await self._run(self.embeddings_spec, settings(**base))
        for spec in (stages.CHUNK_SPEC, stages.ENTITY_SPEC):
            await self._run(ProcessorSpec(spec.name, spec.settings,
                                          self.handled.wrap(spec.services), spec.uses),
                            stages.EmbeddingStageSettings(**base, **self.settings))
        if collect:
            async def chunk_vector(record, ctx):
                self.chunk_vectors.append(record)

            async def entity_vectors(record, ctx):
                self.entity_vectors.append(record)

            await self._run(ProcessorSpec("collector", ProcessorSettings, self.handled.wrap(
                lambda s: [Stage("chunk-vectors", ChunkVector, chunk_vector),
                           Stage("entity-vectors", EntityVectors, entity_vectors)])),
                ProcessorSettings(**base))
        self.bus = Bus(self.broker.url)
        self.emit = Emitters(self.bus, self.flow).emit
        return self

    async def stop(self):
        await self.bus.close()
        for processor in reversed(self.processors):
            await processor.stop()


def scripted_spec(script: ScriptedEmbeddings) -> ProcessorSpec:
    return ProcessorSpec("scripted-embeddings", ProcessorSettings, lambda s: [
        Service("embeddings", EmbeddingsRequest, EmbeddingsResponse, script.handle)])


@pytest.fixture
def script():
    return ScriptedEmbeddings()


@pytest.fixture
async def pipeline(broker, script):
    pipeline = await Pipeline(broker, scripted_spec(script),
                              tg_embeddings_request_texts=8).start()
    yield pipeline
    await pipeline.stop()


def doc(id="d1", user="trustgraph", collection="default", title="") -> DocumentRef:
    return DocumentRef(id=id, user=user, collection=collection, title=title)


def chunk(document: DocumentRef, index: int, text: str) -> Chunk:
    return Chunk(document=document, id=f"{document.id}/c{index}", index=index, text=text)


def entity(name: str, definition: str = "") -> EntityContext:
    return EntityContext(entity=I(f"http://ex/{name}"), label=name, definition=definition)


# --- scripted embeddings -------------------------------------------------------------


async def test_each_chunk_becomes_one_chunk_vector(pipeline, script):
    """Each chunk is embedded under its document's title (TG_EMBED_TITLE, on by
    default), and keeps its own text as the text shown."""
    d = doc(title="T")
    for i in range(6):
        await pipeline.emit("chunks", chunk(d, i, "x" * (i + 1)))
    await pipeline.handled.until("chunk-vectors", 6)
    by_id = {v.chunk.id: v for v in pipeline.chunk_vectors}
    assert sorted(by_id) == [f"d1/c{i}" for i in range(6)]
    for i in range(6):
        embedded = "T\n\n" + "x" * (i + 1)
        assert by_id[f"d1/c{i}"].vector[0] == len(embedded)  # its own text's vector
        assert by_id[f"d1/c{i}"].chunk == chunk(d, i, "x" * (i + 1))
        assert len(by_id[f"d1/c{i}"].vector) == DIM
    # Each text asked for once (chunks in hand together may share a request).
    assert sorted(t for r in script.requests for t in r) == \
        ["T\n\n" + "x" * (i + 1) for i in range(6)]


async def test_entities_are_embedded_as_label_and_definition(pipeline, script):
    await pipeline.emit("entities", ChunkEntities(document=doc(), chunk_id="d1/c0", entities=[
        entity("cat", "a small feline"), entity("mat"), entity("cat", "a duplicate mention"),
        EntityContext(entity=I("http://ex/nameless"), label="  ")]))
    await pipeline.handled.until("entity-vectors", 1)
    assert script.requests == [["cat: a small feline", "mat"]]
    [record] = pipeline.entity_vectors
    assert record.document == doc()
    assert [(e.entity, e.label) for e in record.entities] == [
        (I("http://ex/cat"), "cat"), (I("http://ex/mat"), "mat")]
    assert record.entities[0].vector[0] == len("cat: a small feline")


async def test_many_entities_are_batched_per_request_and_split_per_record(pipeline, script):
    names = [f"entity-{i:03d}" for i in range(400)]
    await pipeline.emit("entities", ChunkEntities(document=doc(), chunk_id="d1/c0",
                                                  entities=[entity(n) for n in names]))
    await pipeline.handled.until("entities", 1)
    assert [len(r) for r in script.requests] == [8] * 50  # 8 texts per request
    # 400 vectors of 384 dimensions (~3 MB) is too much for one record: several, none lost
    await eventually(lambda: sum(len(r.entities) for r in pipeline.entity_vectors) >= 400,
                     "400 entity vectors")
    assert len(pipeline.entity_vectors) >= 2
    got = [e.label for r in pipeline.entity_vectors for e in r.entities]
    assert sorted(got) == names


async def test_unembeddable_input_is_rejected_and_the_stage_goes_on(pipeline, script):
    await pipeline.emit("chunks", chunk(doc(), 0, "   "))
    await pipeline.emit("entities", ChunkEntities(document=doc(), chunk_id="d1/c0", entities=[
        EntityContext(entity=I("http://ex/a"), label="")]))
    script.fail.append(HandledError("bad-request", "this text cannot be embedded"))
    await pipeline.emit("chunks", chunk(doc(), 1, "refused"))
    await pipeline.handled.until("chunks", 2)
    await pipeline.handled.until("entities", 1)
    await pipeline.emit("chunks", chunk(doc(), 2, "fine"))
    await pipeline.handled.until("chunk-vectors", 1)
    assert [v.chunk.text for v in pipeline.chunk_vectors] == ["fine"]
    assert script.requests == [["refused"], ["fine"]]  # the refusal was not retried


async def test_a_failing_embeddings_service_means_redelivery(pipeline, script):
    script.fail.append(HandledError("embeddings-error", "provider briefly unavailable"))
    await pipeline.emit("chunks", chunk(doc(), 0, "retried"))
    await pipeline.handled.until("chunk-vectors", 1)  # after the 2 s redelivery delay
    assert script.requests == [["retried"], ["retried"]]
    assert [v.chunk.text for v in pipeline.chunk_vectors] == ["retried"]


async def test_no_embeddings_service_means_the_chunk_waits(broker):
    # No service takes the request: it is given up after accept_timeout (the product's
    # 5 s would only make the test wait).
    pipeline = await Pipeline(broker, None, timing=Timing(accept_timeout=0.5),
                              tg_request_timeout=1).start()
    try:
        await pipeline.emit("chunks", chunk(doc(), 0, "patient"))
        # Its handler asked for a vector, got no answer and failed: no vector came of
        # it, and the chunk waits for its redelivery.
        await pipeline.handled.until("chunks:raised", 1)
        assert pipeline.chunk_vectors == []
        script = ScriptedEmbeddings()  # the service comes up: the chunk goes through
        processor = Processor(scripted_spec(script), ProcessorSettings(
            pulsar_url=broker.url, tg_flows=[pipeline.flow]))
        await processor.start()
        pipeline.processors.append(processor)
        await pipeline.handled.until("chunk-vectors", 1, timeout=30)
        assert [v.chunk.text for v in pipeline.chunk_vectors] == ["patient"]
    finally:
        await pipeline.stop()


# --- the real embeddings service and the real vector store ----------------------------


DOCUMENTS = {
    "bread": ["Sourdough bread rises slowly thanks to wild yeast and lactic bacteria.",
              "Bake the loaf in a hot Dutch oven for a crisp crust."],
    "pulsar": ["Apache Pulsar stores messages durably in persistent topics.",
               "A Shared subscription spreads messages across competing consumers."],
}


async def test_end_to_end_with_the_real_model_and_vector_store(broker, data_dir):
    pipeline = Pipeline(broker, EMBEDDINGS_SPEC, EmbeddingsSettings)
    await pipeline.start(collect=False)
    base = dict(pulsar_url=broker.url, tg_flows=[pipeline.flow], tg_data_dir=str(data_dir))
    store = Processor(ProcessorSpec(service_vectors.NAME, service_vectors.VectorStoreSettings,
                                    pipeline.handled.wrap(service_vectors.services)),
                      service_vectors.VectorStoreSettings(**base))
    await store.start()
    pipeline.processors.append(store)
    requesters = {}
    try:
        for service in ("embeddings", "document-embeddings", "graph-embeddings"):
            requesters[service] = Requester(pipeline.bus, service, pipeline.flow,
                                            f"test-{uuid.uuid4().hex[:8]}",
                                            timing=Timing(timeout=60))
            await requesters[service].start()
        for user in ("alice", "bob"):
            for name, texts in DOCUMENTS.items():
                d = doc(name, user=user, title=name.title())
                for i, text in enumerate(texts):
                    await pipeline.emit("chunks", chunk(d, i, f"{text} ({user})"))
                await pipeline.emit("entities", ChunkEntities(
                    document=d, chunk_id=f"{name}/c0", entities=[
                        entity(f"{name}-topic", texts[0]), entity(f"{user}-{name}")]))
        await pipeline.handled.until("chunk-vectors", 8, timeout=120)
        await pipeline.handled.until("entity-vectors", 4, timeout=120)

        async def embed(text):
            response = await requesters["embeddings"].call(EmbeddingsRequest(texts=[text]),
                                                           EmbeddingsResponse)
            return response.vectors[0]

        question = await embed("How do I get a crunchy crust on my bread?")
        for user in ("alice", "bob"):
            found = (await requesters["document-embeddings"].call(DocumentEmbeddingsRequest(
                vector=question, limit=4, user=user), DocumentEmbeddingsResponse)).chunks
            assert found[0].chunk_id == "bread/c1" and found[0].title == "Bread"
            assert all(c.text.endswith(f"({user})") for c in found)  # never the other user's
            assert len(found) == 4 and found[0].score > found[-1].score
        entities = (await requesters["graph-embeddings"].call(GraphEmbeddingsRequest(
            vector=await embed("message queues and topics"), limit=10, user="bob"),
            GraphEmbeddingsResponse)).entities
        assert entities[0].entity == I("http://ex/pulsar-topic")
        assert {e.entity.i for e in entities} == {
            "http://ex/pulsar-topic", "http://ex/bread-topic", "http://ex/bob-pulsar",
            "http://ex/bob-bread"}
        nobody = await requesters["document-embeddings"].call(DocumentEmbeddingsRequest(
            vector=question, user="carol"), DocumentEmbeddingsResponse)
        assert nobody.chunks == []
    finally:
        await pipeline.stop()


async def test_an_entity_is_embedded_once_per_collection(pipeline, script):
    """Each mention still gets its vector (the store lists every document naming an
    entity), but the service embeds an entity once per collection: again only for
    a richer text (a definition), or in another collection."""
    records = [(doc("d1"), [entity("cat"), entity("mat")]),
               (doc("d2"), [entity("cat"), entity("hat")]),
               (doc("d3"), [entity("cat", "a small feline")]),
               (doc("d4"), [entity("cat")]),
               (doc("d5", collection="other"), [entity("cat")])]
    for n, (document, entities) in enumerate(records, 1):
        await pipeline.emit("entities", ChunkEntities(document=document, chunk_id=f"c{n}",
                                                      entities=entities))
        await pipeline.handled.until("entity-vectors", n)
    assert script.requests == [["cat", "mat"], ["hat"], ["cat: a small feline"], ["cat"]]
    by_chunk = {r.chunk_id: r for r in pipeline.entity_vectors}
    assert sorted(by_chunk) == ["c1", "c2", "c3", "c4", "c5"]  # each names its chunk
    cat = {n: next(e.vector[0] for e in by_chunk[f"c{n}"].entities if e.label == "cat")
           for n in range(1, 6)}
    assert cat == {1: 3, 2: 3, 3: len("cat: a small feline"), 4: len("cat: a small feline"),
                   5: 3}  # the richest text seen in its collection, then remembered


async def test_a_chunk_without_entities_still_says_it_is_done(pipeline, script):
    await pipeline.emit("entities", ChunkEntities(document=doc(), chunk_id="d1/c7",
                                                  entities=[]))
    await pipeline.handled.until("entity-vectors", 1)
    assert [(r.chunk_id, r.entities) for r in pipeline.entity_vectors] == [("d1/c7", [])]
    assert script.requests == []


async def test_a_chunk_delivered_again_whose_vector_is_stored_is_not_embedded_again(
        broker, data_dir, script):
    """The first delivery stores its vector, then fails (as a crash after the write
    would): the second finds the vector stored (chunk-count, the real vector store)
    and is done without asking for it again."""
    pipeline = Pipeline(broker, scripted_spec(script))
    await pipeline.start(collect=False)
    base = dict(pulsar_url=broker.url, tg_flows=[pipeline.flow], tg_data_dir=str(data_dir))
    store = Processor(ProcessorSpec(service_vectors.NAME, service_vectors.VectorStoreSettings,
                                    pipeline.handled.wrap(service_vectors.services)),
                      service_vectors.VectorStoreSettings(**base))
    await store.start()
    pipeline.processors.append(store)
    counter = Requester(pipeline.bus, "chunk-count", pipeline.flow, uuid.uuid4().hex[:8])
    await counter.start()
    stored = ChunkCountRequest(documents=[ChunkSet(id="d1", version=1, index=0)])
    try:
        chunk_stage = next(p for p in pipeline.processors if p.spec.name == "chunk-embeddings")
        [runner] = list(chunk_stage._serving.stages())
        handler = runner.stage.handler
        deliveries = []

        async def first_fails_once_stored(record, ctx):
            deliveries.append(delivery())
            await handler(record, ctx)
            if len(deliveries) == 1:  # stored before the failure: the redelivery finds it
                await eventually(lambda: counter.call(stored, ChunkCountResponse),
                                 "the vector stored", accept=lambda a: a.stored == [1])
                raise RuntimeError("crashed after the write, before the acknowledgement")
        runner.stage.handler = first_fails_once_stored
        await pipeline.emit("chunks", Chunk(document=DocumentRef(id="d1", version=1),
                                            id="d1/c0", index=0, text="only once"))
        await pipeline.handled.until("chunks", 2, timeout=30)  # each delivery's handling
        assert deliveries == [1, 2]
        assert script.requests == [["only once"]]
    finally:
        await pipeline.stop()
