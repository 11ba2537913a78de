"""What both store owners (``triples-store`` and ``vector-store``) share: reading a
pipeline record's scope, answering within one broker message, forgetting a removed
document, deleting a collection, and reporting a chunk's graph stored."""
import logging
from collections.abc import Awaitable, Callable
from typing import Literal

from trustgraph.base import (
    BadRequest,
    Context,
    HandledError,
    Rejected,
    Service,
    StageContext,
    StageHandler,
)
from trustgraph.pubsub.pulsar_shim import MAX_RECORD_BYTES
from trustgraph.schema import (
    COLLECTIONS_FLOW,
    CollectionDeleteRequest,
    CollectionDeleteResponse,
    DocumentRef,
    DocumentRemoved,
    GraphProgress,
    encode,
)

log = logging.getLogger(__name__)


def scope_of(document: DocumentRef) -> tuple[str, str]:
    """The record's (user, collection), or ``Rejected`` when it names none."""
    if not document.id:
        raise Rejected("the record names no document")
    if not document.user or not document.collection:
        raise Rejected(f"document {document.id!r} has no user or collection")
    return document.user, document.collection


def fits_one_message(response, count: int, service: str) -> None:
    """Refuse, with a limit that would fit, a response too big for one broker message."""
    size = len(encode(response))
    if size > MAX_RECORD_BYTES:
        fitting = max(1, count * MAX_RECORD_BYTES // size * 9 // 10)
        raise HandledError("response-too-large", (
            f"the {count} results are {size} bytes, over the {MAX_RECORD_BYTES} bytes "
            f"one {service} response can carry: ask with limit {fitting} or less"))


async def report_progress(ctx: StageContext, document: DocumentRef, chunk_id: str,
                          part: Literal["triples", "entities"]) -> None:
    """Tell the librarian that a chunk's part of the graph is stored (load-status):
    for chunks of loaded documents only (RDF loaded as it is has no version)."""
    if chunk_id and document.version:
        await ctx.emit("graph-progress", GraphProgress(document=document, chunk_id=chunk_id,
                                                       part=part))


def removal_stage(store, kind: str) -> StageHandler[DocumentRemoved]:
    """The "document-removed" handler of a store owner (triples or vectors: both have
    ``remove_document``); ``kind`` names it in the log."""
    async def remove_document(record: DocumentRemoved, ctx: StageContext) -> None:
        user, collection = scope_of(record.document)
        await store.remove_document(user, collection, record.document.id)
        log.info("document %r removed from %s of %s/%s", record.document.id, kind, user,
                 collection)
    return remove_document


def collection_service(name: str, delete: Callable[[str, str], Awaitable[dict[str, int]]]
                       ) -> Service:
    """A store owner's part of deleting a collection (``COLLECTION_OWNERS``): service
    ``name``, answering what ``delete(user, collection)`` removed, by what it counts.
    Safe to repeat: a collection deleted already removes nothing."""
    async def handle(request: CollectionDeleteRequest, ctx: Context
                     ) -> CollectionDeleteResponse:
        if not request.user or not request.collection:
            raise BadRequest("user and collection must not be empty")
        removed = await delete(request.user, request.collection)
        log.info("id=%s collection %s/%s deleted: %s", ctx.id, request.user,
                 request.collection, ", ".join(f"{n} {kind}" for kind, n in removed.items()))
        return CollectionDeleteResponse(removed=removed)
    # outside flows: a collection is deleted whichever flows run (or none)
    return Service(name, CollectionDeleteRequest, CollectionDeleteResponse, handle,
                   error_type=f"{name}-error", global_flow=COLLECTIONS_FLOW)
