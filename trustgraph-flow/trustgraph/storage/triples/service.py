"""The triples store's owner (processor ``triples-store``, docs/query-services.md).

One process holds the triples store (SQLite in the data dir, or Neo4j) and serves
both sides of it:

* stage ``triples`` — ``ChunkTriples`` from extraction, stored with their document
  and chunk as provenance. The store keys a triple by (triple, document, chunk), so a
  redelivered or re-loaded record writes nothing twice;
* stage ``document-removed`` — forgets the document's provenance and the triples
  only it supported;
* service ``triples`` — pattern query (any of s, p, o bound), scoped by user and
  collection;
* service ``subgraph`` — GraphRAG's retrieval in one request: breadth-first expansion
  from seed entities (one store round trip per hop), then the labels of every IRI
  reached and the provenance of every triple kept (one round trip each), and the
  labels of the documents and chunks cited (titles, heading paths);
* services ``graph-version`` and ``graph-edges`` — the scope's graph version (bumped
  by every write and removal) and its entity graph a page at a time (streaming: every
  page for one request), for readers that cache what they derive from the whole
  graph (LazyRAG's communities);
* service ``knowledge-load`` — triples a user already has (an RDF graph), stored
  with the request's ``source`` as their document (in a collection made first, if it
  was never set: ``collection-management``'s update, as a load through the librarian
  makes it); then each IRI with an
  ``rdfs:label`` among them goes to stage ``entities`` (``ChunkEntities``, the label
  and any ``skos:definition`` / ``rdfs:comment`` of the same request), so the entity
  embedding stage gives it a vector as it does for extracted entities;
* service ``core-triples`` — triples with their provenance a page at a time, out of
  and into a collection, for knowledge cores (core.py);
* service ``collection-triples`` (bus only) — a collection's triples deleted, for
  ``collection-management``'s delete (the count answered).
"""
import asyncio
import json
import logging
from collections.abc import AsyncIterator
from functools import partial

from trustgraph.base import (
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
)
from trustgraph.pubsub.pulsar_shim import MAX_RECORD_BYTES
from trustgraph.schema import (
    RDFS_LABEL,
    ChunkEntities,
    ChunkTriples,
    CollectionManagementRequest,
    CollectionManagementResponse,
    DocumentRef,
    DocumentRemoved,
    EntityContext,
    Evidence,
    GraphEdgesRequest,
    GraphEdgesResponse,
    GraphVersionRequest,
    GraphVersionResponse,
    KnowledgeLoadRequest,
    KnowledgeLoadResponse,
    SubgraphRequest,
    SubgraphResponse,
    Term,
    Triple,
    TriplesQueryRequest,
    TriplesQueryResponse,
    encode,
)

from ...extract.vocabulary import NOT_STATEMENTS, chunk_iri, document_iri
from ..checks import PROBE_TERM, store_probe
from ..owner import (
    collection_service,
    fits_one_message,
    removal_stage,
    report_progress,
    scope_of,
)
from ..settings import StoreSettings
from .configured import open_triples_store
from .core import core_triples_service
from .store import TriplesStore, expand, iris

log = logging.getLogger(__name__)

NAME = "triples-store"
# Predicates whose literal describes an entity, best first: the text embedded with its
# label (as extraction's definitions are).
DEFINITIONS = ("http://www.w3.org/2004/02/skos/core#definition",
               "http://www.w3.org/2000/01/rdf-schema#comment")
ENTITIES_PER_RECORD = 1000  # a ChunkEntities record stays far under the message limit



class TriplesStoreSettings(StoreSettings, ProcessorSettings):
    pass


def triples_stage(store: TriplesStore) -> StageHandler[ChunkTriples]:
    async def store_triples(record: ChunkTriples, ctx: StageContext) -> None:
        user, collection = scope_of(record.document)
        good: list[Triple] = []
        bad: list[Triple] = []
        for triple in record.triples:
            (good if triple.s.is_iri and triple.p.is_iri else bad).append(triple)
        if good:
            await store.add(user, collection, good, document=record.document.id,
                            chunk=record.chunk_id)
        await report_progress(ctx, record.document, record.chunk_id, "triples")
        if bad:
            # The good ones are stored; acknowledging (Rejected) keeps the bad ones
            # from coming back forever.
            raise Rejected(f"{len(bad)} of {len(record.triples)} triples from chunk "
                           f"{record.chunk_id!r} skipped: subject and predicate must be "
                           f"IRIs (first: {bad[0].model_dump_json(exclude_none=True)})")
    return store_triples


def query_handler(store: TriplesStore) -> Handler[TriplesQueryRequest, TriplesQueryResponse]:
    async def query(request: TriplesQueryRequest, ctx: Context) -> TriplesQueryResponse:
        for position in ("s", "p"):
            term = getattr(request, position)
            if term is not None and not term.is_iri:
                # No stored triple has a literal there: say so rather than match nothing.
                raise BadRequest(f"'{position}' must be an IRI term "
                                   f"({{\"t\": \"i\", \"i\": ...}}); literals only appear as 'o'")
        triples = await store.query(request.user, request.collection, request.s,
                                    request.p, request.o, request.limit)
        response = TriplesQueryResponse(response=triples)
        fits_one_message(response, len(triples), "triples")
        return response
    return query


def subgraph_handler(store: TriplesStore) -> Handler[SubgraphRequest, SubgraphResponse]:
    async def subgraph(request: SubgraphRequest, ctx: Context) -> SubgraphResponse:
        scope = request.user, request.collection
        chunk_triples = await store.chunk_triples(*scope, request.seed_chunks or ())
        seeds = mixed_seeds(request, chunk_triples)
        graph = await expand(store, *scope, seeds, max_hops=request.max_path_length,
                             max_entities=request.max_entities,
                             max_triples=request.max_subgraph_size,
                             triples_per_entity=request.triple_limit)
        triples = with_chunk_triples(graph.triples, request, chunk_triples)
        named = iris([*seeds, *(x for t in triples for x in (t.s, t.p, t.o))])
        # Two independent lookups: concurrent, so the request costs hops + 1 round trips
        # of waiting (SQLite serves them on two reader threads).
        labels, found = await asyncio.gather(
            store.labels(*scope, [Term.iri(iri) for iri in named]),
            # A triple found in a chunk the question matched is cited from that chunk.
            store.provenance(*scope, triples, request.seed_chunks or ()))
        evidence = []
        for triple in triples:
            document, chunk = found.get(triple, ("", ""))  # "": removed meanwhile
            evidence.append(Evidence(triple=triple, document_id=document, chunk_id=chunk))
        named_labels = {e.value: label for e, label in labels.items()}
        named_labels |= await citation_labels(store, *scope, evidence, named_labels)
        return one_message(evidence, named_labels, iris(seeds), ctx)
    return subgraph


async def citation_labels(store: TriplesStore, user: str, collection: str,
                          evidence: list[Evidence], known: dict[str, str]) -> dict[str, str]:
    """The labels, not among ``known``, of the documents and chunks ``evidence`` is
    cited from: their titles and heading paths, for citing a triple by where it was
    found rather than by an id."""
    documents = {e.document_id for e in evidence if e.document_id}
    chunks = {e.chunk_id for e in evidence if e.chunk_id}
    wanted = {*map(document_iri, documents), *map(chunk_iri, chunks)} - known.keys()
    if not wanted:
        return {}
    found = await store.labels(user, collection, [Term.iri(iri) for iri in sorted(wanted)])
    return {term.value: label for term, label in found.items()}


def mixed_seeds(request: SubgraphRequest,
                chunk_triples: dict[str, list[Triple]]) -> list[Term]:
    """The request's seeds, and the entities of its ``seed_chunks`` (the subjects and
    IRI objects of each chunk's triples, in ascending order: each chunk's first,
    then each one's second, …) in up to half of ``max_entities``, placed before the
    seeds that budget leaves out."""
    if not request.seed_chunks:
        return request.seeds
    per_chunk = [sorted({e for t in chunk_triples.get(chunk, []) for e in (t.s, t.o)
                         if e.is_iri}, key=lambda e: e.value)
                 for chunk in request.seed_chunks]
    from_chunks = [entities[n] for n in range(max(map(len, per_chunk), default=0))
                   for entities in per_chunk if n < len(entities)]
    share = min(len(from_chunks), request.max_entities // 2)
    kept = request.max_entities - share
    mixed = [*request.seeds[:kept], *from_chunks[:share], *request.seeds[kept:]]
    return list(dict.fromkeys(mixed))


def with_chunk_triples(expanded: list[Triple], request: SubgraphRequest,
                       chunk_triples: dict[str, list[Triple]]) -> list[Triple]:
    """The statements of the ``seed_chunks`` (no labels or provenance edges: up to
    ``triple_limit`` per chunk, in up to half of ``max_subgraph_size``: each
    chunk's first, then each one's second,
    …, so that every chunk asked for has its part), after the expansion's others
    within the rest of it. The expansion follows edges in store order and stops at
    its budget, so without this the triples extracted from the chunks that best
    match the question are often left out, and so are their documents; kept whether
    the expansion reached them or not, as a triple it reached late would be cut
    with the expansion's tail."""
    budget = request.max_subgraph_size
    per_chunk = [[t for t in chunk_triples.get(chunk, []) if t.p.i not in NOT_STATEMENTS]
                 [:request.triple_limit] for chunk in request.seed_chunks or ()]
    in_turn = [triples[n] for n in range(max(map(len, per_chunk), default=0))
               for triples in per_chunk if n < len(triples)]
    extra = list(dict.fromkeys(in_turn))[:budget // 2]
    chosen = set(extra)
    return [*[t for t in expanded if t not in chosen][:budget - len(extra)], *extra]


# Bytes of one message kept for the record's envelope (end flag, braces, field names).
ENVELOPE_BYTES = 1024


def one_message(evidence: list[Evidence], labels: dict[str, str], seeds: list[str],
                ctx: Context) -> SubgraphResponse:
    """The subgraph as one response under the broker's message limit. Too big (long
    literals), it keeps the triples reached first, i.e. nearest the seeds, and the
    labels they use: what ``max_subgraph_size`` keeps anyway, only fewer."""
    response = SubgraphResponse(triples=evidence, labels=labels)
    if len(encode(response)) <= MAX_RECORD_BYTES:
        return response
    kept = {iri: labels[iri] for iri in seeds if iri in labels}
    used = ENVELOPE_BYTES + sum(map(_label_bytes, kept.items()))
    for n, item in enumerate(evidence):
        t = item.triple
        new = {i: labels[i] for i in iris((t.s, t.p, t.o)) if i in labels and i not in kept}
        cost = len(encode(item)) + 1 + sum(map(_label_bytes, new.items()))
        if used + cost > MAX_RECORD_BYTES:
            log.warning("id=%s subgraph: %d of %d triples fit in one message", ctx.id, n,
                        len(evidence))
            response = SubgraphResponse(triples=evidence[:n], labels=kept)
            break
        used += cost
        kept.update(new)
    fits_one_message(response, len(response.triples or ()), "subgraph")  # a guard, never hit
    return response


def _label_bytes(item: tuple[str, str]) -> int:
    """At least what ``"iri":"label",`` takes in the response."""
    return len(json.dumps(item, ensure_ascii=False).encode())


def labelled_entities(triples: list[Triple]) -> list[EntityContext]:
    """Each IRI subject with a literal ``rdfs:label`` (its first), with its best
    definition among ``DEFINITIONS``, in order of first label."""
    labels: dict[Term, str] = {}
    described: dict[Term, dict[str, str]] = {}  # entity → {predicate: first text}
    for triple in triples:
        text = triple.o.value
        if triple.o.is_iri or not text.strip():
            continue
        if triple.p.i == RDFS_LABEL:
            labels.setdefault(triple.s, text)
        elif triple.p.i in DEFINITIONS:
            described.setdefault(triple.s, {}).setdefault(triple.p.value, text)
    return [EntityContext(entity=entity, label=label,
                          definition=_best_definition(described.get(entity, {})))
            for entity, label in labels.items()]


def _best_definition(found: dict[str, str]) -> str:
    return next((found[predicate] for predicate in DEFINITIONS if predicate in found), "")


def version_handler(store: TriplesStore) -> Handler[GraphVersionRequest, GraphVersionResponse]:
    async def version(request: GraphVersionRequest, ctx: Context) -> GraphVersionResponse:
        return GraphVersionResponse(version=await store.version(request.user,
                                                                request.collection))
    return version


def edges_handler(store: TriplesStore) -> Handler[GraphEdgesRequest, GraphEdgesResponse]:
    async def edges(request: GraphEdgesRequest, ctx: Context
                    ) -> AsyncIterator[GraphEdgesResponse]:
        # Read first: a write landing while the pages are read then shows as a newer
        # version, so a cache built from these pages is rebuilt rather than kept.
        version = await store.version(request.user, request.collection)
        after: int | None = request.after
        while after is not None:
            page = await store.edges(request.user, request.collection, after,
                                     request.limit)
            after = page.next if request.streaming else None
            # The page's JSON as the store wrote it: this loop (which serves
            # GraphRAG's subgraph requests too) neither builds nor encodes its edges,
            # and the size checked is that of the bytes sent.
            response = GraphEdgesResponse.page(page.edges, page.labels, page.next, version,
                                               end_of_stream=after is None)
            fits_one_message(response, request.limit, "graph-edges")
            yield response
    return edges


def knowledge_load_handler(store: TriplesStore
                          ) -> Handler[KnowledgeLoadRequest, KnowledgeLoadResponse]:
    async def load(request: KnowledgeLoadRequest, ctx: Context) -> KnowledgeLoadResponse:
        triples = list(dict.fromkeys(request.triples))
        # Loading into a collection makes it (as a load through the librarian does).
        collections = await ctx.clients.get("collection-management")
        await collections.call(CollectionManagementRequest(
            operation="update-collection", user=request.user,
            collection=request.collection), CollectionManagementResponse)
        await store.add(request.user, request.collection, triples, document=request.source)
        document = DocumentRef(id=request.source, user=request.user,
                               collection=request.collection)
        entities = labelled_entities(triples)
        for start in range(0, len(entities), ENTITIES_PER_RECORD):
            await ctx.emit("entities", ChunkEntities(
                document=document, chunk_id=request.source,
                entities=entities[start:start + ENTITIES_PER_RECORD]))
        log.info("id=%s knowledge-load: %d triples from %r into %s/%s; %d entities to "
                 "embed", ctx.id, len(triples), request.source, request.user,
                 request.collection, len(entities))
        return KnowledgeLoadResponse(triples=len(triples), entities=len(entities))
    return load


async def services(runtime: Runtime) -> list[Service | Stage]:
    store = await open_triples_store(runtime.settings)
    runtime.check_store("triples", store_probe(store.count, lambda user, collection: store.add(
        user, collection, [Triple(s=PROBE_TERM, p=PROBE_TERM, o=Term.literal("written"))],
        document="probe"), store.delete_collection))
    return parts(store)


def parts(store: TriplesStore) -> list[Service | Stage]:
    """What ``triples-store`` serves with this store (tests pass a store they watch)."""
    return [
        Stage("triples", ChunkTriples, triples_stage(store), subscription=NAME),
        Stage("document-removed", DocumentRemoved, removal_stage(store, "triples"),
              subscription=NAME),
        Service("triples", TriplesQueryRequest, TriplesQueryResponse, query_handler(store),
                error_type="triples-error", close=store.close),
        Service("subgraph", SubgraphRequest, SubgraphResponse, subgraph_handler(store),
                error_type="subgraph-error"),
        Service("graph-version", GraphVersionRequest, GraphVersionResponse,
                version_handler(store), error_type="graph-version-error"),
        Service("graph-edges", GraphEdgesRequest, GraphEdgesResponse, edges_handler(store),
                error_type="graph-edges-error"),
        Service("knowledge-load", KnowledgeLoadRequest, KnowledgeLoadResponse,
                knowledge_load_handler(store), error_type="knowledge-load-error"),
        core_triples_service(store),
        collection_service("collection-triples", partial(_triples_deleted, store)),
    ]


async def _triples_deleted(store: TriplesStore, user: str, collection: str
                           ) -> dict[str, int]:
    return {"triples": await store.delete_collection(user, collection)}


SPEC = ProcessorSpec(NAME, TriplesStoreSettings, services)
