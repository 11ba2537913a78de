"""Service ``core-documents`` of the librarian: a collection's documents' metadata, a
page at a time, for knowledge cores (``trustgraph.schema.cores``).

A core carries no content: an imported document is known by its metadata (listed,
cited by title); a document the collection has already is left as it is, so an
import run again changes nothing.
"""
import asyncio
from collections.abc import Awaitable, Callable, Mapping

from trustgraph.base import BadRequest, Context, Handler, Service
from trustgraph.schema import LIBRARIAN_FLOW, DocumentMetadata
from trustgraph.schema.cores import (
    CORE_SERVICES,
    CoreDocument,
    CoreOperation,
    CoreRequest,
    CoreResponse,
    lines,
    rows_of,
)
from trustgraph.schema.operations import per_operation

from .store import LibraryStore

NAME = "core-documents"


async def _count(store: LibraryStore, request: CoreRequest) -> CoreResponse:
    documents = await asyncio.to_thread(store.documents, request.user, request.collection)
    return CoreResponse(count=len(documents))


async def _export(store: LibraryStore, request: CoreRequest) -> CoreResponse:
    page = await asyncio.to_thread(store.documents, request.user, request.collection,
                                   request.after, request.limit)
    return CoreResponse(count=len(page), records=lines([
        CoreDocument(**d.model_dump(exclude={"user", "collection"})) for d in page]),
        next=page[-1].id if len(page) == request.limit else None)


async def _import(store: LibraryStore, request: CoreRequest) -> CoreResponse:
    try:
        rows = rows_of(CoreDocument, request.records)
    except ValueError as error:
        raise BadRequest(f"documents: {error}") from None
    await asyncio.to_thread(store.add_metadata, [
        DocumentMetadata(**row.model_dump(), user=request.user,
                         collection=request.collection) for row in rows])
    return CoreResponse(stored=len(rows))


# Each operation CoreRequest declares, and the function that does it here.
OPERATIONS: Mapping[CoreOperation, Callable[[LibraryStore, CoreRequest],
                                            Awaitable[CoreResponse]]] = per_operation(
    CoreRequest, {"count": _count, "export": _export, "import": _import},
    f"the {NAME} service's operations")


def core_documents_handler(store: LibraryStore) -> Handler[CoreRequest, CoreResponse]:
    async def handle(request: CoreRequest, ctx: Context) -> CoreResponse:
        if request.part not in (held := CORE_SERVICES[NAME]):
            raise BadRequest(f"{NAME} holds {' and '.join(held)}, not {request.part}")
        return await OPERATIONS[request.operation](store, request)
    return handle


def core_documents_service(store: LibraryStore) -> Service:
    return Service(NAME, CoreRequest, CoreResponse, core_documents_handler(store),
                   error_type=f"{NAME}-error", global_flow=LIBRARIAN_FLOW)
