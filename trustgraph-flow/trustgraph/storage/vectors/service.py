"""The vector store's owner (processor ``vector-store``, docs/query-services.md).

In embedded mode the Qdrant Edge shards may be opened by one process only, so this
one processor serves every use of them (DESIGN §1); with a Qdrant server it is just
as valid, and may be replicated:

* stage ``chunk-vectors`` — a chunk's vector, text and title (document vectors);
  with a re-loaded document's first chunk, the chunks an earlier, longer version
  left beyond the new last one are dropped;
* stage ``entity-vectors`` — entity vectors, each listing the documents that
  mention it;
* stage ``document-removed`` — deletes the document's chunk vectors and the entity
  vectors no other document supports;
* services ``document-embeddings`` (chunks nearest a vector), ``lexical-search``
  (chunks best matching a question's words: BM25 over the lexical index kept beside
  the chunk vectors, lexical.py) and ``graph-embeddings`` (entities nearest a
  vector), scoped by user and collection;
* service ``reembed``: every vector of a (user, collection) computed again by the
  ``embeddings`` service's model, and the collection stamped with it (reembed.py;
  ``tg-reembed``); progress records, then the totals;
* service ``chunk-count`` (bus only): how many chunk vectors of a version of a
  document are stored, which the librarian's ``load-status`` reports;
* service ``core-vectors``: chunks and entity vectors a page at a time, out of and
  into a collection, for knowledge cores (core.py);
* service ``collection-vectors`` (bus only): a collection's chunk and entity vectors
  and lexical index deleted, for ``collection-management``'s delete (what each held
  answered).

Points are keyed by chunk id or entity, so a redelivered record overwrites itself.
"""
import logging
import math
from collections.abc import AsyncIterator

from trustgraph.base import (
    BULK,
    BadRequest,
    Context,
    Handler,
    ProcessorSettings,
    ProcessorSpec,
    Rejected,
    Runtime,
    Service,
    Stage,
    StageContext,
    StageHandler,
    Yielded,
    set_lane,
)
from trustgraph.schema import (
    ChunkCountRequest,
    ChunkCountResponse,
    ChunkVector,
    DocumentEmbeddingsRequest,
    DocumentEmbeddingsResponse,
    DocumentRemoved,
    EmbeddingsRequest,
    EmbeddingsResponse,
    EntityVectors,
    GraphEmbeddingsRequest,
    GraphEmbeddingsResponse,
    LexicalSearchRequest,
    ReembedRequest,
    ReembedResponse,
    ScoredChunk,
    ScoredEntity,
)

from ..checks import PROBE_TERM, store_probe
from ..owner import (
    collection_service,
    fits_one_message,
    removal_stage,
    report_progress,
    scope_of,
)
from ..settings import StoreSettings
from . import store as stored
from .configured import open_vector_store
from .core import core_vectors_service
from .reembed import reembed
from .spaces import is_dimension_error
from .stamps import ModelMismatch
from .store import VectorStore

log = logging.getLogger(__name__)

NAME = "vector-store"


class VectorStoreSettings(StoreSettings, ProcessorSettings):
    pass


def check_vector(vector: list[float], what: str) -> None:
    if not vector:
        raise Rejected(f"{what} has an empty vector")
    if not all(math.isfinite(x) for x in vector):
        raise Rejected(f"{what} has a vector with non-finite values")


def chunk_vectors_stage(store: VectorStore) -> StageHandler[ChunkVector]:
    async def store_chunk(record: ChunkVector, ctx: StageContext) -> None:
        document = record.chunk.document
        user, collection = scope_of(document)
        if not record.chunk.id:
            raise Rejected(f"a chunk of document {document.id!r} has no id")
        check_vector(record.vector, f"chunk {record.chunk.id!r}")
        try:
            await store.upsert_chunks(user, collection, [stored_chunk(record)], record.model)
        except ModelMismatch as error:
            raise Rejected(f"chunk {record.chunk.id!r} not stored: {error}") from None
        except Exception as error:
            if is_dimension_error(error):
                raise Rejected(f"chunk {record.chunk.id!r} not stored in {user}/"
                               f"{collection}: {error} (vectors of another model? delete "
                               f"the collection to change models)") from None
            raise
        if record.chunk.index == 0 and record.chunk.total is not None and document.version:
            # Once per version: its first chunk is always there.
            if dropped := await store.remove_stale_chunks(user, collection, document.id,
                                                          document.version,
                                                          record.chunk.total):
                log.info("dropped %d chunks of %r that earlier versions left beyond its "
                         "%d chunks", dropped, document.id, record.chunk.total)
    return store_chunk


def stored_chunk(record: ChunkVector) -> stored.ChunkVector:
    """The chunk as stored: its text, title and heading path (both indexed), and
    what a citation of it shows (``citation``)."""
    chunk, document = record.chunk, record.chunk.document
    return stored.ChunkVector(
        chunk_id=chunk.id, document=document.id, vector=record.vector, text=chunk.text,
        title=document.title, version=document.version, index=chunk.index,
        headings=" > ".join(chunk.headings or []), meta=citation(chunk))


def citation(chunk) -> dict:
    """Where the chunk is, in ``ScoredChunk``'s names; only what is known."""
    meta = {"order": chunk.index, "header_titles": chunk.headings, "author": chunk.author}
    if chunk.page is not None:
        meta["page_range"] = [chunk.page, chunk.page_end or chunk.page]
    if chunk.char_start is not None and chunk.char_end is not None:
        meta["char_range"] = [chunk.char_start, chunk.char_end]
    return {key: value for key, value in meta.items() if value is not None and value != []}


def scored_chunk(match: stored.ChunkMatch) -> ScoredChunk:
    return ScoredChunk(chunk_id=match.chunk_id, text=match.text, score=match.score,
                       document_id=match.document, title=match.title, **match.meta)


def entity_vectors_stage(store: VectorStore) -> StageHandler[EntityVectors]:
    async def store_entities(record: EntityVectors, ctx: StageContext) -> None:
        document = record.document
        user, collection = scope_of(document)
        for entity in record.entities:
            check_vector(entity.vector, f"entity {entity.entity.value!r}")
        try:
            await store.upsert_entities(user, collection, [stored.EntityVector(
                entity=e.entity, vector=e.vector, label=e.label, document=document.id)
                for e in record.entities], record.model)
        except ModelMismatch as error:
            raise Rejected(f"entity vectors of document {document.id!r} not stored: "
                           f"{error}") from None
        except Exception as error:
            if is_dimension_error(error):
                raise Rejected(f"entity vectors of document {document.id!r} not stored in "
                               f"{user}/{collection}: {error}") from None
            raise
        await report_progress(ctx, document, record.chunk_id, "entities")
    return store_entities


async def _searching(search, request: DocumentEmbeddingsRequest | GraphEmbeddingsRequest):
    user, collection = request.user, request.collection
    try:
        return await search(user, collection, request.vector, request.limit, request.model)
    except ModelMismatch as error:
        raise BadRequest(str(error)) from None
    except Exception as error:
        if is_dimension_error(error):
            raise BadRequest(f"the vector does not match the vectors "
                               f"stored in {user}/{collection}: {error}") from None
        raise


def document_handler(store: VectorStore
                    ) -> Handler[DocumentEmbeddingsRequest, DocumentEmbeddingsResponse]:
    async def search(request: DocumentEmbeddingsRequest, ctx: Context
                     ) -> DocumentEmbeddingsResponse:
        found = await _searching(store.search_chunks, request)
        response = DocumentEmbeddingsResponse(chunks=[scored_chunk(m) for m in found])
        fits_one_message(response, len(found), "document-embeddings")
        return response
    return search


def lexical_handler(store: VectorStore
                   ) -> Handler[LexicalSearchRequest, DocumentEmbeddingsResponse]:
    async def search(request: LexicalSearchRequest, ctx: Context
                     ) -> DocumentEmbeddingsResponse:
        found = await store.search_lexical(request.user, request.collection, request.query,
                                           request.limit)
        response = DocumentEmbeddingsResponse(chunks=[scored_chunk(m) for m in found])
        fits_one_message(response, len(found), "lexical-search")
        return response
    return search


def graph_handler(store: VectorStore) -> Handler[GraphEmbeddingsRequest, GraphEmbeddingsResponse]:
    async def search(request: GraphEmbeddingsRequest, ctx: Context
                     ) -> GraphEmbeddingsResponse:
        found = await _searching(store.search_entities, request)
        return GraphEmbeddingsResponse(entities=[
            ScoredEntity(entity=m.entity, score=m.score, label=m.label) for m in found])
    return search


def reembed_handler(store: VectorStore) -> Handler[ReembedRequest, ReembedResponse]:
    async def handle(request: ReembedRequest, ctx: Context
                     ) -> AsyncIterator[Yielded[ReembedResponse]]:
        set_lane(BULK)  # a whole collection's vectors: behind any question's work
        embeddings = await ctx.clients.get("embeddings")

        async def embed(texts: list[str]) -> tuple[list[list[float]], str]:
            answer = await embeddings.call(EmbeddingsRequest(texts=texts),
                                           EmbeddingsResponse)
            vectors = answer.vectors or []
            if len(vectors) != len(texts) or not answer.model:
                raise BadRequest(f"the embeddings service answered {len(vectors)} vectors "
                                 f"for {len(texts)} texts, made by {answer.model!r}")
            return vectors, answer.model

        progress = None
        try:
            async for progress in reembed(store, request.user, request.collection, embed,
                                          request.embed_title, request.page):
                yield _progress(progress, end=False)
        except ModelMismatch as error:
            raise BadRequest(str(error)) from None
        if progress is None:  # nothing stored: nothing to do
            yield ReembedResponse(model=await store.model_of(request.user,
                                                             request.collection))
        else:
            yield _progress(progress, end=True)
    return handle


def _progress(progress, end: bool) -> ReembedResponse:
    return ReembedResponse(model=progress.model, previous_model=progress.previous,
                           chunks=progress.done["chunks"],
                           entities=progress.done["entities"], total=progress.total,
                           end_of_stream=end)


def count_handler(store: VectorStore) -> Handler[ChunkCountRequest, ChunkCountResponse]:
    async def count(request: ChunkCountRequest, ctx: Context) -> ChunkCountResponse:
        return ChunkCountResponse(stored=await store.stored_chunks(
            request.user, request.collection,
            [(d.id, d.version) if d.index is None else (d.id, d.version, d.index)
             for d in request.documents]))
    return count


def services(runtime: Runtime) -> list[Service | Stage]:
    store = open_vector_store(runtime.settings)
    runtime.check_store("vectors", store_probe(
        store.count, lambda user, collection: store.upsert_entities(
            user, collection, [stored.EntityVector(PROBE_TERM, [1.0, 0.0, 0.0], "probe")]),
        store.delete_collection))
    return parts(store)


def parts(store: VectorStore) -> list[Service | Stage]:
    """What ``vector-store`` serves with this store (tests pass a store they made)."""
    return [
        Stage("chunk-vectors", ChunkVector, chunk_vectors_stage(store), subscription=NAME),
        Stage("entity-vectors", EntityVectors, entity_vectors_stage(store),
              subscription=NAME),
        Stage("document-removed", DocumentRemoved, removal_stage(store, "vectors"),
              subscription=NAME),
        Service("document-embeddings", DocumentEmbeddingsRequest, DocumentEmbeddingsResponse,
                document_handler(store), error_type="document-embeddings-error"),
        Service("lexical-search", LexicalSearchRequest, DocumentEmbeddingsResponse,
                lexical_handler(store), error_type="lexical-search-error"),
        Service("reembed", ReembedRequest, ReembedResponse, reembed_handler(store),
                error_type="reembed-error"),
        Service("chunk-count", ChunkCountRequest, ChunkCountResponse, count_handler(store),
                error_type="chunk-count-error"),
        core_vectors_service(store),
        collection_service("collection-vectors", store.delete_collection),
        Service("graph-embeddings", GraphEmbeddingsRequest, GraphEmbeddingsResponse,
                graph_handler(store), error_type="graph-embeddings-error",
                close=store.close),
    ]


SPEC = ProcessorSpec(NAME, VectorStoreSettings, services, uses=("embeddings",))
