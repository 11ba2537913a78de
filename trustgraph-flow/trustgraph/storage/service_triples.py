"""The triples store's owner (processor ``triples-store``, docs/query-services.md).

One process holds the triples store (SQLite in the data dir, or Neo4j) and serves
both sides of it:

* stage ``triples`` — ``ChunkTriples`` from extraction, stored with their document
  and chunk as provenance. The store keys a triple by (triple, document, chunk), so a
  redelivered or re-loaded record writes nothing twice;
* stage ``document-removed`` — forgets the document's provenance and the triples
  only it supported;
* service ``triples`` — pattern query (any of s, p, o bound), scoped by user and
  collection.
"""
import logging

from trustgraph.base import (Context, HandledError, ProcessorSettings, ProcessorSpec,
                             Rejected, Service, Stage, processor_main)
from trustgraph.base.stage import MAX_RECORD_BYTES
from trustgraph.schema import (ChunkTriples, DocumentRef, DocumentRemoved, Triple,
                               TriplesQueryRequest, TriplesQueryResponse, encode)

from .settings import StoreSettings
from .stores import open_triples_store
from .triples.store import TriplesStore

log = logging.getLogger(__name__)

NAME = "triples-store"


class TriplesStoreSettings(StoreSettings, ProcessorSettings):
    pass


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


def triples_stage(store: TriplesStore):
    async def store_triples(record: ChunkTriples, ctx) -> None:
        user, collection = scope_of(record.document)
        good: list[Triple] = []
        bad: list[Triple] = []
        for triple in record.triples:
            (good if triple.s.is_iri and triple.p.is_iri else bad).append(triple)
        if good:
            await store.add(user, collection, good, document=record.document.id,
                            chunk=record.chunk_id)
        if bad:
            # The good ones are stored; acknowledging (Rejected) keeps the bad ones
            # from coming back forever.
            raise Rejected(f"{len(bad)} of {len(record.triples)} triples from chunk "
                           f"{record.chunk_id!r} skipped: subject and predicate must be "
                           f"IRIs (first: {bad[0].model_dump_json(exclude_none=True)})")
    return store_triples


def removal_stage(store: TriplesStore):
    async def remove_document(record: DocumentRemoved, ctx) -> None:
        user, collection = scope_of(record.document)
        await store.remove_document(user, collection, record.document.id)
        log.info("document %r removed from triples of %s/%s", record.document.id, user,
                 collection)
    return remove_document


def query_handler(store: TriplesStore):
    async def query(request: TriplesQueryRequest, ctx: Context) -> TriplesQueryResponse:
        for position in ("s", "p"):
            term = getattr(request, position)
            if term is not None and not term.is_iri:
                # No stored triple has a literal there: say so rather than match nothing.
                raise HandledError("bad-request", f"'{position}' must be an IRI term "
                                   f"({{\"t\": \"i\", \"i\": ...}}); literals only appear as 'o'")
        triples = await store.query(request.user, request.collection, request.s,
                                    request.p, request.o, request.limit)
        response = TriplesQueryResponse(response=triples)
        fits_one_message(response, len(triples), "triples")
        return response
    return query


async def services(settings: TriplesStoreSettings) -> list[Service | Stage]:
    store = await open_triples_store(settings)
    return [
        Stage("triples", ChunkTriples, triples_stage(store), subscription=NAME),
        Stage("document-removed", DocumentRemoved, removal_stage(store), subscription=NAME),
        Service("triples", TriplesQueryRequest, TriplesQueryResponse, query_handler(store),
                error_type="triples-error", close=store.close),
    ]


SPEC = ProcessorSpec(NAME, TriplesStoreSettings, services)
main = processor_main(SPEC)
