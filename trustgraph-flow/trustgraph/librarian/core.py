"""Service ``core-documents`` of the librarian: a collection's documents' metadata, a
page at a time, for knowledge cores (``trustgraph.schema.cores``).

A core carries no content: an imported document is known by its metadata (listed,
cited by title); a document the collection has already is left as it is, so an
import run again changes nothing.
"""
import asyncio

from trustgraph.base import BadRequest, Context, Handler, Service
from trustgraph.schema import DocumentMetadata
from trustgraph.schema.cores import CoreDocument, CoreRequest, CoreResponse, lines, rows_of

from .store import LibraryStore


def core_documents_handler(store: LibraryStore) -> Handler[CoreRequest, CoreResponse]:
    async def handle(request: CoreRequest, ctx: Context) -> CoreResponse:
        if request.part != "documents":
            raise BadRequest(f"core-documents holds documents, not {request.part}")
        scope = request.user, request.collection
        match request.operation:
            case "count":
                documents = await asyncio.to_thread(store.documents, *scope)
                return CoreResponse(count=len(documents))
            case "export":
                page = await asyncio.to_thread(store.documents, *scope, request.after,
                                               request.limit)
                return CoreResponse(count=len(page), records=lines([
                    CoreDocument(**d.model_dump(exclude={"user", "collection"}))
                    for d in page]),
                    next=page[-1].id if len(page) == request.limit else None)
            case "import":
                try:
                    rows = rows_of(CoreDocument, request.records)
                except ValueError as error:
                    raise BadRequest(f"documents: {error}") from None
                await asyncio.to_thread(store.add_metadata, [
                    DocumentMetadata(**row.model_dump(), user=request.user,
                                     collection=request.collection) for row in rows])
                return CoreResponse(stored=len(rows))
        raise BadRequest(f"unknown operation {request.operation!r}")
    return handle


def core_documents_service(store: LibraryStore) -> Service:
    return Service("core-documents", CoreRequest, CoreResponse,
                   core_documents_handler(store), error_type="core-documents-error")
