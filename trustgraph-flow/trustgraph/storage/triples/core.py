"""Service ``core-triples`` of the triples store's owner: a collection's triples with
their provenance, a page at a time, for knowledge cores (``trustgraph.schema.cores``).

A row is one triple as found in one chunk of one document. Imported rows are stored
as extraction stores them, keyed by (triple, document, chunk), so an import run
again, whole or in part, stores nothing twice; no entity is sent to embedding (a
core carries the entity vectors).
"""
import logging

from trustgraph.base import BadRequest, Context, Handler, Service
from trustgraph.schema.cores import CoreRequest, CoreResponse, CoreTriple, lines, rows_of

from ..core_pages import fitting_page
from .store import TriplesStore

log = logging.getLogger(__name__)


def core_triples_handler(store: TriplesStore) -> Handler[CoreRequest, CoreResponse]:
    async def handle(request: CoreRequest, ctx: Context) -> CoreResponse:
        if request.part != "triples":
            raise BadRequest(f"core-triples holds triples, not {request.part}")
        scope = request.user, request.collection
        match request.operation:
            case "count":
                return CoreResponse(count=await store.provenance_count(*scope))
            case "export":
                return await fitting_page(lambda limit: _page(store, request, limit),
                                          request.limit)
            case "import":
                rows = _rows(request.records)
                await store.add_provenance(*scope, rows)
                log.debug("id=%s core import: %d triples into %s/%s", ctx.id, len(rows),
                          *scope)
                return CoreResponse(stored=len(rows))
        raise BadRequest(f"unknown operation {request.operation!r}")
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
    return Service("core-triples", CoreRequest, CoreResponse, core_triples_handler(store),
                   error_type="core-triples-error")
