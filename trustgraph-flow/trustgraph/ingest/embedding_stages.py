"""The two embedding stages of the ingestion pipeline (docs/ingestion.md), each a
processor that calls the ``embeddings`` service:

* ``chunk-embeddings`` — stage ``chunks`` (its own subscription, beside extraction's):
  one ``Chunk`` → its vector (of the chunk under its heading path, and title when
  ``TG_EMBED_TITLE``: chunking/context.py) → ``ChunkVector`` to ``chunk-vectors``;
  the texts of the chunks in hand at once go to the service together (collector.py);
* ``entity-embeddings`` — stage ``entities``: a ``ChunkEntities`` → the vectors of
  ``"label: definition"`` for all its entities, in one request (or a few, for a very
  long list) → ``EntityVectors`` to ``entity-vectors``.

The embeddings service batches concurrent requests into shared model runs, so many
chunks in flight at once (``TG_CONCURRENCY``) keep the model busy. A record is
acknowledged only after its vectors are emitted; the embeddings service being away
or failing leaves it unacknowledged, to be redelivered.
"""
import logging
import math
from collections.abc import Sequence

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
)
from trustgraph.pubsub.pulsar_shim import MAX_RECORD_BYTES
from trustgraph.schema import (
    Chunk,
    ChunkEntities,
    ChunkVector,
    EmbeddingsRequest,
    EmbeddingsResponse,
    EntityVector,
    EntityVectors,
    encode,
)

from ..chunking.context import embedded_text
from .collector import Collector

log = logging.getLogger(__name__)

# Errors of the embeddings service that retrying cannot cure.
PERMANENT_ERRORS = {"bad-request", "too-many-texts"}


class EmbeddingStageSettings(ProcessorSettings):
    tg_embeddings_request_texts: int = Field(64, ge=1, description=(
        "texts per embeddings request (at most the service's TG_EMBEDDINGS_MAX_TEXTS)"))
    tg_embed_title: bool = Field(True, description=(
        "embed each chunk with its document title before its heading path (the "
        "heading path is always embedded; the lexical index always has the title)"))


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


def chunk_stage(settings: EmbeddingStageSettings) -> StageHandler[Chunk]:
    per_request = settings.tg_embeddings_request_texts
    collectors: dict[str, Collector] = {}  # per flow: each has its embeddings service

    def collector(ctx: StageContext) -> Collector:
        if ctx.flow not in collectors:
            async def send(texts: list[str]) -> list[tuple[list[float], str]]:
                vectors, model = await embed(await ctx.clients.get("embeddings"), texts,
                                             per_request,
                                             f"{len(texts)} chunk(s) on flow {ctx.flow}")
                return [(vector, model) for vector in vectors]
            collectors[ctx.flow] = Collector(send, per_request)
        return collectors[ctx.flow]

    async def embed_chunk(chunk: Chunk, ctx: StageContext) -> None:
        if not chunk.id:
            raise Rejected(f"a chunk of document {chunk.document.id!r} has no id")
        if not chunk.text.strip():
            raise Rejected(f"chunk {chunk.id!r} has no text to embed")
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


def entity_stage(settings: EmbeddingStageSettings) -> StageHandler[ChunkEntities]:
    async def embed_entities(record: ChunkEntities, ctx: StageContext) -> None:
        # One vector per entity (the first mention in the record wins); an entity
        # needs a label to be embedded.
        first: dict = {}
        for entity in record.entities:
            if entity.label.strip():
                first.setdefault(entity.entity, entity)
        entities = list(first.values())
        if not entities:
            if record.entities:
                raise Rejected(f"entities of chunk {record.chunk_id!r} have no labels")
            return  # a chunk without entities: nothing to do
        embeddings = await ctx.clients.get("embeddings")
        vectors, model = await embed(embeddings, [entity_text(e.label, e.definition)
                                           for e in entities],
                              settings.tg_embeddings_request_texts,
                              f"entities of chunk {record.chunk_id!r}")
        found = [EntityVector(entity=e.entity, label=e.label.strip(), vector=v)
                 for e, v in zip(entities, vectors, strict=False)]
        for group in record_groups(found):
            await ctx.emit("entity-vectors", EntityVectors(document=record.document,
                                                           entities=group, model=model))
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

