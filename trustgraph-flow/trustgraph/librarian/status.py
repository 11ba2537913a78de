"""``load-status`` (trustgraph.schema.load_status): how far each document has got.

Two parties know part of the answer: the decoder records in the library how many
chunks each version of a document became (or why it could not be read), and the
vector store's owner knows how many of those chunks have their vector stored. This
handler reads the first and asks the second (``chunk-count``) for the documents
that have chunks, so a status is never more advanced than what is durable.
"""
import asyncio

from trustgraph.base import Context, HandledError, Handler, ServiceError
from trustgraph.schema import (
    ChunkCountRequest,
    ChunkCountResponse,
    ChunkSet,
    DocumentStatus,
    LoadStatusRequest,
    LoadStatusResponse,
)

from .store import DecoderRecord, LibraryStore


def status_of(id: str, record: DecoderRecord | None, stored: int) -> DocumentStatus:
    if record is None:
        return DocumentStatus(id=id, state="unknown")
    if record.error is not None:
        return DocumentStatus(id=id, state="failed", version=record.version,
                              error=record.error)
    if record.chunks is None:
        return DocumentStatus(id=id, state="decoding", version=record.version)
    return DocumentStatus(id=id, state="done" if stored >= record.chunks else "embedding",
                          version=record.version, chunks=record.chunks,
                          stored=min(stored, record.chunks))


def status_handler(store: LibraryStore) -> Handler[LoadStatusRequest, LoadStatusResponse]:
    async def load_status(request: LoadStatusRequest, ctx: Context) -> LoadStatusResponse:
        user, collection = request.user, request.collection
        recorded = await asyncio.to_thread(store.load_status, user, collection,
                                           request.documents, ctx.flow)
        counted = [ChunkSet(id=id, version=r.version) for id, r in recorded.items()
                   if r.chunks and r.error is None]
        stored: dict[str, int] = {}
        if counted:
            counter = await ctx.clients.get("chunk-count")
            try:
                answer = await counter.call(ChunkCountRequest(
                    user=user, collection=collection, documents=counted), ChunkCountResponse)
            except ServiceError as error:
                raise HandledError(error.error.type, "cannot count the stored chunks: "
                                   f"{error.error.message}") from None
            stored = {c.id: n for c, n in zip(counted, answer.stored or [], strict=False)}
        return LoadStatusResponse(documents=[
            status_of(id, recorded.get(id), stored.get(id, 0)) for id in request.documents])
    return load_status
