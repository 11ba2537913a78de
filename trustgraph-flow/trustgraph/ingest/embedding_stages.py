"""The two embedding stages of the ingestion pipeline (docs/ingestion.md), each a
processor that calls the ``embeddings`` service:

* ``chunk-embeddings`` — stage ``chunks`` (its own subscription, beside extraction's):
  one ``Chunk`` → its vector (of the chunk under its heading path, and title when
  ``TG_EMBED_TITLE``: chunking/context.py) → ``ChunkVector`` to ``chunk-vectors``;
  the texts of the chunks in hand at once go to the service together (collector.py);
* ``entity-embeddings`` — stage ``entities``: a ``ChunkEntities`` → the vectors of
  ``"label: definition"`` for all its entities → ``EntityVectors`` to
  ``entity-vectors`` (the last record of a chunk names it, even with no entities:
  load-status counts the chunk's entity vectors stored once it is). An entity is
  embedded once per collection (entity_memory.py), and the texts of the records in
  hand at once go to the service together (collector.py), as chunks' do.

Both run in the bulk lane (a question's embedding goes first) and take at most
``TG_STAGE_IN_FLIGHT`` records at once (base/stage.py): a few requests in flight
keep the model fed (the service runs what waits together), and a request waiting
its turn there says it is queued rather than time out. A record is acknowledged
only after its vectors are emitted; the embeddings service being away or failing
leaves it unacknowledged, to be redelivered. A chunk delivered again whose vector
an earlier delivery already stored is not embedded again.
"""
import logging
import math
from collections.abc import Callable, Sequence

from pydantic import Field

from trustgraph.base import (
    ProcessorSettings,
    ProcessorSpec,
    Rejected,
    ServiceClient,
    ServiceError,
    Stage,
    StageContext,
    StageHandler,
    delivery,
)
from trustgraph.pubsub.pulsar_shim import MAX_RECORD_BYTES
from trustgraph.schema import (
    Chunk,
    ChunkCountRequest,
    ChunkCountResponse,
    ChunkEntities,
    ChunkSet,
    ChunkVector,
    EmbeddingsRequest,
    EmbeddingsResponse,
    EntityContext,
    EntityVector,
    EntityVectors,
    encode,
)

from ..chunking.context import embedded_text
from .collector import Collector
from .entity_memory import EntityMemory

log = logging.getLogger(__name__)

# Errors of the embeddings service that retrying cannot cure.
PERMANENT_ERRORS = {"bad-request", "too-many-texts"}


class EmbeddingStageSettings(ProcessorSettings):
    tg_embeddings_request_texts: int = Field(64, ge=1, description=(
        "texts per embeddings request (at most the service's TG_EMBEDDINGS_MAX_TEXTS)"))
    tg_embed_title: bool = Field(True, description=(
        "embed each chunk with its document title before its heading path (the "
        "heading path is always embedded; the lexical index always has the title)"))
    tg_entity_memory: int = Field(20_000, ge=0, description=(
        "entity vectors entity-embeddings remembers (~2 KB each), so that an entity is "
        "embedded once per collection rather than once per mention (0: every mention)"))


async def embed(embeddings: ServiceClient, texts: list[str], per_request: int,
                what: str) -> tuple[list[list[float]], str]:
    """One vector per text, in order, asking at most ``per_request`` texts at a time,
    and the model that made them ("" from a service that does not say)."""
    vectors: list[list[float]] = []
    model = ""
    for start in range(0, len(texts), per_request):
        part = texts[start:start + per_request]
        try:
            response = await embeddings.call(EmbeddingsRequest(texts=part),
                                              EmbeddingsResponse)
        except ServiceError as error:
            if error.error.type in PERMANENT_ERRORS:
                raise Rejected(f"{what}: the embeddings service refused it: {error}") from None
            raise  # the provider failed: redelivered later
        got = response.vectors or []
        model = response.model or ""
        if len(got) != len(part):
            raise RuntimeError(f"{what}: the embeddings service answered {len(got)} "
                               f"vectors for {len(part)} texts")
        vectors += got
    for vector in vectors:
        if not vector or not all(math.isfinite(x) for x in vector):
            raise RuntimeError(f"{what}: the embeddings service answered an empty or "
                               f"non-finite vector")
    return vectors, model


def collectors(settings: EmbeddingStageSettings, what: str
               ) -> Callable[[StageContext], Collector]:
    """Each flow's ``Collector`` (each flow has its embeddings service), made on
    first use: texts → (vector, model) each."""
    per_request = settings.tg_embeddings_request_texts
    made: dict[str, Collector] = {}

    def collector(ctx: StageContext) -> Collector:
        if ctx.flow not in made:
            async def send(texts: list[str]) -> list[tuple[list[float], str]]:
                vectors, model = await embed(await ctx.clients.get("embeddings"), texts,
                                             per_request,
                                             f"{len(texts)} {what} on flow {ctx.flow}")
                return [(vector, model) for vector in vectors]
            made[ctx.flow] = Collector(send, per_request)
        return made[ctx.flow]
    return collector


async def already_stored(chunk: Chunk, ctx: StageContext) -> bool:
    """Whether an earlier delivery of ``chunk`` stored its vector (this version's);
    False when that cannot be told (the vector store's owner away)."""
    document = chunk.document
    try:
        counter = await ctx.clients.get("chunk-count")
        answer = await counter.call(ChunkCountRequest(
            user=document.user, collection=document.collection, documents=[ChunkSet(
                id=document.id, version=document.version, index=chunk.index)]),
            ChunkCountResponse)
    except Exception as error:
        log.info("chunk %r: not known whether its vector is stored (%s): embedding it",
                 chunk.id, error)
        return False
    return bool(answer.stored and answer.stored[0])


def chunk_stage(settings: EmbeddingStageSettings) -> StageHandler[Chunk]:
    collector = collectors(settings, "chunk(s)")

    async def embed_chunk(chunk: Chunk, ctx: StageContext) -> None:
        if not chunk.id:
            raise Rejected(f"a chunk of document {chunk.document.id!r} has no id")
        if not chunk.text.strip():
            raise Rejected(f"chunk {chunk.id!r} has no text to embed")
        if delivery() > 1 and await already_stored(chunk, ctx):
            log.info("chunk %r delivered again: its vector is stored already", chunk.id)
            return
        title = chunk.document.title if settings.tg_embed_title else ""
        vector, model = await collector(ctx).vector(
            embedded_text(chunk.text, chunk.headings, title))
        await ctx.emit("chunk-vectors", ChunkVector(chunk=chunk, vector=vector, model=model))
    return embed_chunk


def entity_text(label: str, definition: str) -> str:
    """What an entity vector is computed from: ``"label: definition"``, or the label
    alone when there is no definition."""
    label, definition = label.strip(), definition.strip()
    return f"{label}: {definition}" if definition else label


def record_groups(vectors: Sequence[EntityVector], limit: int = MAX_RECORD_BYTES // 2
                  ) -> list[list[EntityVector]]:
    """Split entity vectors into groups whose records stay well under the broker's
    message size (each 384-d vector is ~8 KB of JSON)."""
    groups: list[list[EntityVector]] = [[]]
    size = 0
    for vector in vectors:
        item = len(encode(vector))
        if groups[-1] and size + item > limit:
            groups.append([])
            size = 0
        groups[-1].append(vector)
        size += item
    return [g for g in groups if g]


def labelled(record: ChunkEntities) -> list[EntityContext]:
    """One mention per entity with a label: its first, or its first with a
    definition (the richer text to embed)."""
    chosen: dict = {}
    for entity in record.entities:
        if entity.label.strip():
            known = chosen.get(entity.entity)
            if known is None or (entity.definition.strip() and not known.definition.strip()):
                chosen[entity.entity] = entity
    if record.entities and not chosen:
        log.warning("entities of chunk %r have no labels: none embedded", record.chunk_id)
    return list(chosen.values())


def entity_stage(settings: EmbeddingStageSettings) -> StageHandler[ChunkEntities]:
    collector = collectors(settings, "entity text(s)")
    memory = EntityMemory(settings.tg_entity_memory)

    async def vectors_of(entities: list[EntityContext], record: ChunkEntities,
                         ctx: StageContext) -> tuple[list[list[float]], str]:
        """A vector per entity, remembered or made (and remembered), and the model."""
        user, collection = record.document.user, record.document.collection
        known = [memory.recall(user, collection, e) for e in entities]
        model = memory.model or ""
        wanted = [e for e, vector in zip(entities, known, strict=True) if vector is None]
        if wanted:
            made = await collector(ctx).vectors([entity_text(e.label, e.definition)
                                                 for e in wanted])
            if len(wanted) < len(entities) and made[0][1] != model:
                # The service's model changed: what was remembered is another model's.
                wanted, known = entities, [None] * len(entities)
                made = await collector(ctx).vectors([entity_text(e.label, e.definition)
                                                     for e in wanted])
            model = made[0][1]
            for entity, (vector, _) in zip(wanted, made, strict=True):
                memory.remember(user, collection, entity, vector, model)
            fresh = iter(vector for vector, _ in made)
            known = [vector if vector is not None else next(fresh) for vector in known]
        return [vector for vector in known if vector is not None], model

    async def embed_entities(record: ChunkEntities, ctx: StageContext) -> None:
        entities = labelled(record)
        vectors, model = await vectors_of(entities, record, ctx) if entities else ([], "")
        found = [EntityVector(entity=e.entity, label=e.label.strip(), vector=v)
                 for e, v in zip(entities, vectors, strict=True)]
        groups = record_groups(found) or [[]]
        for n, group in enumerate(groups):
            last = n == len(groups) - 1  # it names the chunk: all of it is sent
            await ctx.emit("entity-vectors", EntityVectors(
                document=record.document, entities=group, model=model,
                chunk_id=record.chunk_id if last else ""))
    return embed_entities


CHUNK_SPEC = ProcessorSpec(
    "chunk-embeddings", EmbeddingStageSettings,
    lambda runtime: [Stage("chunks", Chunk, chunk_stage(runtime.settings),
                            subscription="chunk-embeddings")],
    uses=("embeddings",))

ENTITY_SPEC = ProcessorSpec(
    "entity-embeddings", EmbeddingStageSettings,
    lambda runtime: [Stage("entities", ChunkEntities, entity_stage(runtime.settings),
                            subscription="entity-embeddings")],
    uses=("embeddings",))

