"""``load-status`` (trustgraph.schema.load_status): how far each document has got.

Three parties know part of the answer: the decoder records in the library how many
chunks each version of a document became (or why it could not be read); the
vector store's owner knows how many of those chunks have their vector stored; and
the store owners report each chunk's graph as they store it (graph_progress.py).
This handler reads the first and the last here and asks the second
(``chunk-count``) for the documents that have chunks, so a status is never more
advanced than what is durable.
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

from .graph_progress import GraphProgressStore
from .store import DecoderRecord, LibraryStore


def status_of(id: str, record: DecoderRecord | None, stored: int,
              graph: dict[str, int] | None = None) -> DocumentStatus:
    if record is None:
        return DocumentStatus(id=id, state="unknown")
    if record.error is not None:
        return DocumentStatus(id=id, state="failed", version=record.version,
                              error=record.error)
    if record.chunks is None:
        return DocumentStatus(id=id, state="decoding", version=record.version)
    status = DocumentStatus(id=id, state="done" if stored >= record.chunks else "embedding",
                            version=record.version, chunks=record.chunks,
                            stored=min(stored, record.chunks))
    if graph is not None:
        triples, entities = (min(graph.get(part, 0), record.chunks)
                             for part in ("triples", "entities"))
        status.triples, status.entities = triples, entities
        status.graph = "done" if min(triples, entities) >= record.chunks else "extracting"
    return status


def status_handler(store: LibraryStore, progress: GraphProgressStore
                   ) -> Handler[LoadStatusRequest, LoadStatusResponse]:
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
        graph = await asyncio.to_thread(progress.counts, user, collection, ctx.flow,
                                        {c.id: c.version for c in counted}) \
            if request.graph else {}
        return LoadStatusResponse(documents=[
            status_of(id, recorded.get(id), stored.get(id, 0), graph.get(id))
            for id in request.documents])
    return load_status
