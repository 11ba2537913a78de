"""Service ``core-triples`` of the triples store's owner: a collection's triples with
their provenance, a page at a time, for knowledge cores (``trustgraph.schema.cores``).

A row is one triple as found in one chunk of one document. Imported rows are stored
as extraction stores them, keyed by (triple, document, chunk), so an import run
again, whole or in part, stores nothing twice; no entity is sent to embedding (a
core carries the entity vectors).
"""
import logging
from collections.abc import Awaitable, Callable, Mapping

from trustgraph.base import BadRequest, Context, Handler, Service
from trustgraph.schema.cores import (
    CORE_SERVICES,
    CoreOperation,
    CoreRequest,
    CoreResponse,
    CoreTriple,
    lines,
    rows_of,
)
from trustgraph.schema.operations import per_operation

from ..core_pages import fitting_page
from .store import TriplesStore

log = logging.getLogger(__name__)

NAME = "core-triples"


async def _count(store: TriplesStore, request: CoreRequest, ctx: Context) -> CoreResponse:
    return CoreResponse(count=await store.provenance_count(request.user, request.collection))


async def _export(store: TriplesStore, request: CoreRequest, ctx: Context) -> CoreResponse:
    return await fitting_page(lambda limit: _page(store, request, limit), request.limit)


async def _import(store: TriplesStore, request: CoreRequest, ctx: Context) -> CoreResponse:
    rows = _rows(request.records)
    await store.add_provenance(request.user, request.collection, rows)
    log.debug("id=%s core import: %d triples into %s/%s", ctx.id, len(rows), request.user,
              request.collection)
    return CoreResponse(stored=len(rows))


# Each operation CoreRequest declares, and the function that does it here.
OPERATIONS: Mapping[CoreOperation, Callable[[TriplesStore, CoreRequest, Context],
                                            Awaitable[CoreResponse]]] = per_operation(
    CoreRequest, {"count": _count, "export": _export, "import": _import},
    f"the {NAME} service's operations")


def core_triples_handler(store: TriplesStore) -> Handler[CoreRequest, CoreResponse]:
    async def handle(request: CoreRequest, ctx: Context) -> CoreResponse:
        if request.part not in (held := CORE_SERVICES[NAME]):
            raise BadRequest(f"{NAME} holds {' and '.join(held)}, not {request.part}")
        return await OPERATIONS[request.operation](store, request, ctx)
    return handle


async def _page(store: TriplesStore, request: CoreRequest, limit: int) -> CoreResponse:
    rows, after = await store.provenance_page(request.user, request.collection,
                                              request.after, limit)
    return CoreResponse(count=len(rows), next=after, records=lines([
        CoreTriple(s=s, p=p, o=o, o_iri=o_iri, document=document, chunk=chunk)
        for s, p, o, o_iri, document, chunk in rows]))


def _rows(records: str):
    try:
        rows = rows_of(CoreTriple, records)
    except ValueError as error:
        raise BadRequest(f"triples: {error}") from None
    for n, row in enumerate(rows, 1):
        if not (row.s and row.p and row.document):
            raise BadRequest(f"triples: line {n}: s, p and document must not be empty")
    return [(r.s, r.p, r.o, r.o_iri, r.document, r.chunk) for r in rows]


def core_triples_service(store: TriplesStore) -> Service:
    return Service(NAME, CoreRequest, CoreResponse, core_triples_handler(store),
                   error_type=f"{NAME}-error")
