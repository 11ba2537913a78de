"""Service ``core-vectors`` of the vector store's owner: the ``chunks`` and ``entities``
of a collection a page at a time, for knowledge cores (``trustgraph.schema.cores``).

A chunk goes in as the chunk-vectors stage stores one (vector, text, title, citation
fields, and the lexical index beside them); an entity's documents are added to those
it already has. Both are keyed by chunk id or entity, so an import run again, whole
or in part, stores nothing twice. The collection's embedding model is its stamp
(stamps.py): a core says which model made its vectors, an import into a collection
stamped with another is refused (``embedding-model-mismatch``), and the first import
into an unstamped one stamps it with the core's.
"""
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping

from trustgraph.base import BadRequest, Context, HandledError, Handler, Service
from trustgraph.schema import Term
from trustgraph.schema.cores import (
    CORE_SERVICES,
    CoreChunk,
    CoreEntity,
    CoreOperation,
    CoreRequest,
    CoreResponse,
    lines,
    pack_vectors,
    rows_of,
    unpack_vectors,
)
from trustgraph.schema.operations import per_operation

from ..core_pages import fitting_page
from .spaces import is_dimension_error
from .stamps import ModelMismatch
from .store import CHUNKS, ENTITIES, ChunkVector, EntityVector, VectorStore

log = logging.getLogger(__name__)

NAME = "core-vectors"

KINDS = {"chunks": CHUNKS, "entities": ENTITIES}


async def _count(store: VectorStore, request: CoreRequest, ctx: Context) -> CoreResponse:
    scope, kind = (request.user, request.collection), KINDS[request.part]
    counts = await store.count(*scope)
    first, _ = await store.page(kind, *scope, None, 1)
    return CoreResponse(count=counts[kind], dimension=len(first[0].vector) if first else 0,
                        embedding_model=await store.model_of(*scope))


async def _export(store: VectorStore, request: CoreRequest, ctx: Context) -> CoreResponse:
    _check_cursor(request.after)
    return await fitting_page(lambda limit: _page(store, request, limit), request.limit)


async def _import(store: VectorStore, request: CoreRequest, ctx: Context) -> CoreResponse:
    try:
        return CoreResponse(stored=await _stored(store, request, ctx))
    except Exception as error:
        if is_dimension_error(error):
            raise BadRequest(f"{request.part} not stored in {request.user}/"
                             f"{request.collection}: {error}") from None
        raise


# Each operation CoreRequest declares, and the function that does it here.
OPERATIONS: Mapping[CoreOperation, Callable[[VectorStore, CoreRequest, Context],
                                            Awaitable[CoreResponse]]] = per_operation(
    CoreRequest, {"count": _count, "export": _export, "import": _import},
    f"the {NAME} service's operations")


def core_vectors_handler(store: VectorStore) -> Handler[CoreRequest, CoreResponse]:
    async def handle(request: CoreRequest, ctx: Context) -> CoreResponse:
        if request.part not in (held := CORE_SERVICES[NAME]):
            raise BadRequest(f"{NAME} holds {' and '.join(held)}, not {request.part}")
        return await OPERATIONS[request.operation](store, request, ctx)
    return handle


def _check_cursor(after: str) -> None:
    """An ``after`` is "" or a point id this service gave (a UUID)."""
    if after:
        try:
            uuid.UUID(after)
        except ValueError:
            raise BadRequest(f"after: {after[:100]!r} is not the next of a page") from None


async def _page(store: VectorStore, request: CoreRequest, limit: int) -> CoreResponse:
    points, after = await store.page(KINDS[request.part], request.user, request.collection,
                                     request.after or None, limit)
    rows = [_chunk_row(p.payload) if request.part == "chunks" else _entity_row(p.payload)
            for p in points]
    vectors, dimension = pack_vectors([p.vector for p in points])
    return CoreResponse(count=len(rows), records=lines(rows), vectors=vectors,
                        dimension=dimension, next=after)


def _chunk_row(payload: dict) -> CoreChunk:
    return CoreChunk(chunk_id=payload["chunk_id"], document=payload["documents"][0],
                     text=payload.get("text", ""), title=payload.get("title", ""),
                     version=payload.get("version") or 0, index=payload.get("index"),
                     meta=payload.get("meta") or {})


def _entity_row(payload: dict) -> CoreEntity:
    return CoreEntity(entity=Term.model_validate(payload["entity"]),
                      label=payload.get("label", ""), documents=payload.get("documents", []))


async def _check_model(store: VectorStore, request: CoreRequest) -> None:
    """The core's vectors may join the collection's: it has none stamped yet, or they
    are of the same model. Checked without writing: an import of no records (the
    gateway's check before anything is stored) stamps nothing."""
    model = await store.model_of(request.user, request.collection)
    if model is not None and request.embedding_model != model:
        raise _mismatch(request, model)


def _mismatch(request: CoreRequest, model: str) -> HandledError:
    return HandledError("embedding-model-mismatch", (
        f"the core's vectors are of {request.embedding_model or 'no named model'!r}, "
        f"the vectors of {request.user}/{request.collection} of {model!r}: they "
        f"cannot be searched together (import into another collection, or into a "
        f"deployment embedding with the core's model)"))


async def _stored(store: VectorStore, request: CoreRequest, ctx: Context) -> int:
    await _check_model(store, request)
    scope, model = (request.user, request.collection), request.embedding_model
    try:
        if request.part == "chunks":
            chunks = rows_of(CoreChunk, request.records)
            vectors = unpack_vectors(request.vectors, len(chunks))
        else:
            entities = rows_of(CoreEntity, request.records)
            vectors = unpack_vectors(request.vectors, len(entities))
    except ValueError as error:
        raise BadRequest(f"{request.part}: {error}") from None
    try:  # the first stamped write stamps the collection with the core's model
        if request.part == "chunks":
            await store.upsert_chunks(*scope, [_stored_chunk(row, vector) for row, vector
                                               in zip(chunks, vectors, strict=True)], model)
        else:
            await store.put_entities(*scope, [
                (EntityVector(entity=row.entity, vector=vector, label=row.label),
                 row.documents) for row, vector in zip(entities, vectors, strict=True)],
                model)
    except ModelMismatch:  # stamped by another writer since the check
        raise _mismatch(request, await store.model_of(*scope) or "") from None
    log.debug("id=%s core import: %d %s into %s/%s", ctx.id, len(vectors), request.part,
              *scope)
    return len(vectors)


def _stored_chunk(row: CoreChunk, vector: list[float]) -> ChunkVector:
    """As the chunk-vectors stage stores a chunk (its heading path is in its citation)."""
    return ChunkVector(chunk_id=row.chunk_id, document=row.document, vector=vector,
                       text=row.text, title=row.title, version=row.version, index=row.index,
                       headings=" > ".join(row.meta.get("header_titles") or []),
                       meta=row.meta)


def core_vectors_service(store: VectorStore) -> Service:
    return Service(NAME, CoreRequest, CoreResponse, core_vectors_handler(store),
                   error_type=f"{NAME}-error")
