"""Processor ``graph-rag`` (docs/retrieval.md): the entities nearest the question
(and its rewrite and sub-questions) seed one ``subgraph`` request to the triples
store, which expands them hop by hop within the request's limits; the triples found
become labelled statements, answered from with ``kg-prompt``.

Sources are the triples given to the LLM, one each: ``s``/``p``/``o`` as stored,
``text`` the statement as the LLM saw it, ``id``/``document_id`` the chunk and
document the triple was extracted from.

With ``TG_GRAPH_MIX`` (true by default; a service built without retrieval
settings keeps the plain behaviour above) retrieval is "mixed": the
chunks that best match the question (``TG_RETRIEVAL``'s search) also seed the subgraph with
the entities extracted from them, and the triples found are ranked by relevance
(ranking.py: seed nearness, personalised PageRank, the rank of their chunk), the
best ``max-subgraph-size`` kept (among them the best triple of each document the
chunk search found) and grouped by the document they are cited from, the documents
of the best-matching chunks first, each source carrying those scores and its
chunk's document title. The question is embedded once for both searches.
"""
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from pydantic import Field

from trustgraph.base import Clients, ProcessorSpec, Runtime
from trustgraph.base.steps import concurrently, step
from trustgraph.extract.vocabulary import (
    HEADING_SEPARATOR,
    NOT_STATEMENTS,
    chunk_iri,
    document_iri,
)
from trustgraph.schema import (
    Evidence,
    GraphRagRequest,
    ScoredChunk,
    ScoredEntity,
    Source,
    SubgraphRequest,
    SubgraphResponse,
    Term,
)

from .. import explain
from ..answer import Found, rag_service
from ..search import (
    FoundChunk,
    Fusion,
    RetrievalSettings,
    embed,
    merge_rankings,
    search_chunks,
    search_vectors,
)
from .ranking import RankedTriple, best, by_document, rank_triples

NAME = "graph-rag"
ERROR = f"{NAME}-error"
TEMPLATE = "kg-prompt"


CHUNK_SEEDS = 10  # chunks whose entities seed the subgraph, in mixed retrieval
# Where a caller that wants each step's time (bench.graph) gets it: seconds by step.
STEP_TIMES: ContextVar[dict[str, float] | None] = ContextVar("graph_rag_step_times",
                                                            default=None)


@contextmanager
def timed(name: str) -> Iterator[None]:
    times = STEP_TIMES.get()
    started = time.perf_counter()
    try:
        yield
    finally:
        if times is not None:
            times[name] = times.get(name, 0.0) + time.perf_counter() - started


class GraphRagSettings(RetrievalSettings):
    # On by default: it cites the right document far more often (bench.retrieval) for
    # a little more time to metadata (bench.rag; docs/retrieval.md).
    tg_graph_mix: bool = Field(True, description=(
        "seed from the chunks that best match the question too, and rank the triples "
        "found by relevance (seed nearness, personalised PageRank, chunk rank)"))


def triple_retriever(fusion: Fusion | None):
    """Plain (``fusion`` None) or mixed retrieval."""
    async def retrieve_triples(request: GraphRagRequest, searches: list[str],
                               clients: Clients) -> Found:
        # Embedded once: the entity search and the chunk search share the vectors.
        with timed("embed"):
            vectors = await embed(clients, searches, ERROR)
        with timed("seeds and chunks"):
            if fusion is None:
                seeds, chunks = (await seed_entities(request, vectors, clients),
                                 list[FoundChunk]())
            else:
                seeds, chunks = await concurrently(
                    seed_entities(request, vectors, clients),
                    search_chunks(clients, searches, request, CHUNK_SEEDS, ERROR, fusion,
                                  vectors=vectors))
        if not seeds:  # nothing in the collection: answered from no statements
            return Found(sources=[], template=TEMPLATE,
                         variables=kg_variables(request.query, []))
        chunk_ranks = {f.chunk.chunk_id: n for n, f in enumerate(chunks, 1)}
        with timed("subgraph"):
            graph = await expand(request, seeds, list(chunk_ranks), clients,
                                 fusion is not None)
        # The store's labels, else the label the entity was embedded with.
        labels = {seed.entity.value: seed.label for seed in seeds if seed.label}
        labels.update(graph.labels or {})
        used = [e for e in graph.triples or [] if e.triple.p.value not in NOT_STATEMENTS]
        scores: list[dict[str, float] | None] = [None] * len(used)
        if fusion is not None:
            with timed("ranking"):
                considered = rank_triples(used, seeds, chunk_ranks, fusion.k)
                documents = document_ranks(chunks)
                ranked = by_document(best(considered, request.max_subgraph_size, documents),
                                     documents)
            explained(seeds, chunks, considered, ranked, labels)
            used, scores = [r.evidence for r in ranked], [r.scores for r in ranked]
        else:
            everything = [RankedTriple(e, {}) for e in used]
            explained(seeds, chunks, everything, everything, labels)
        found = {f.chunk.chunk_id: f.chunk for f in chunks}
        statements = [statement(e, labels) for e in used]
        sources = [cited(e, words, score, labels, found.get(e.chunk_id))
                   for e, words, score in zip(used, statements, scores, strict=True)]
        return Found(sources=sources, template=TEMPLATE,
                     variables=kg_variables(request.query, statements))
    return retrieve_triples


def explained(seeds: list[ScoredEntity], chunks: list[FoundChunk],
              considered: list[RankedTriple], kept: list[RankedTriple],
              labels: dict[str, str]) -> None:
    """What this answer's retrieval started from and considered, with the scores of
    each ranking and which edges were kept, for its explanation (if it has one)."""
    explanation = explain.current()
    if explanation is None:
        return
    explanation.seed(seeds)
    explanation.consider((explain.Candidate(
        "chunk", f.chunk.chunk_id, f.chunk.text, f.scores, True, f.chunk.document_id)
        for f in chunks), chunk_seeds=True)
    chosen = {id(r.evidence) for r in kept}
    explanation.consider(explain.Candidate(
        "edge", r.evidence.chunk_id or "", " | ".join(statement(r.evidence, labels)),
        r.scores, id(r.evidence) in chosen, r.evidence.document_id or "")
        for r in considered)


def cited(evidence: Evidence, words: tuple[str, str, str], score: dict[str, float] | None,
          labels: dict[str, str], chunk: ScoredChunk | None) -> Source:
    """A statement's source: the triple, and the document (by its title) and heading
    it was extracted from (the store's labels of its document and chunk; the chunk
    search's, for a chunk it found)."""
    title = labels.get(document_iri(evidence.document_id)) if evidence.document_id else None
    path = labels.get(chunk_iri(evidence.chunk_id)) if evidence.chunk_id else None
    headings = path.split(HEADING_SEPARATOR) if path else None
    if chunk is not None:
        title, headings = title or chunk.title, headings or chunk.header_titles
    t = evidence.triple
    return Source(id=evidence.chunk_id, document_id=evidence.document_id,
                  text=" | ".join(words), s=t.s, p=t.p, o=t.o, scores=score,
                  title=title or "", header_titles=headings or None)


def document_ranks(chunks: list[FoundChunk]) -> dict[str, int]:
    """Document id → the rank (from 1) of its best chunk among ``chunks``."""
    ranks: dict[str, int] = {}
    for n, found in enumerate(chunks, 1):
        ranks.setdefault(found.chunk.document_id, n)
    return ranks


# Plain retrieval with the old signature, for callers outside this service (the agent).
retrieve_triples = triple_retriever(None)


async def expand(request: GraphRagRequest, seeds: list[ScoredEntity], chunks: list[str],
                 clients: Clients, mixed: bool) -> SubgraphResponse:
    """One subgraph request; mixed, it asks for twice the triples, so that ranking
    keeps the best ``max-subgraph-size`` of more."""
    size = request.max_subgraph_size * (2 if mixed else 1)
    subgraph = await clients.get("subgraph")
    with step(ERROR, "expanding the subgraph"):
        return await subgraph.call(SubgraphRequest(
            user=request.user, collection=request.collection,
            seeds=[seed.entity for seed in seeds], max_path_length=request.max_path_length,
            max_entities=request.entity_limit, max_subgraph_size=size,
            triple_limit=request.triple_limit, seed_chunks=chunks or None), SubgraphResponse)


async def seed_entities(request: GraphRagRequest, vectors: list[list[float]],
                        clients: Clients) -> list[ScoredEntity]:
    """At most ``entity-limit`` entities, each search's vector contributing its
    nearest."""
    found = await search_vectors(clients, vectors, "graph-embeddings", request,
                                 request.entity_limit, ERROR)
    return merge_rankings([answer.entities or [] for answer in found],
                          key=lambda match: match.entity, score=lambda match: match.score,
                          limit=request.entity_limit)


def kg_variables(query: str, kg: list[tuple[str, str, str]]) -> dict[str, Any]:
    """The variables of ``kg-prompt``: statements as ``{"s", "p", "o"}``."""
    return {"query": query, "knowledge": [{"s": s, "p": p, "o": o} for s, p, o in kg]}


def statement(evidence: Evidence, labels: dict[str, str]) -> tuple[str, str, str]:
    triple = evidence.triple
    return name(triple.s, labels), name(triple.p, labels), name(triple.o, labels)


def name(term: Term, labels: dict[str, str]) -> str:
    """How a term reads to the LLM: its label if it has one, else its IRI or text."""
    return labels.get(term.value, term.value) if term.is_iri else term.value


def services(runtime: Runtime):
    # Tests build the service without a runtime (and so without retrieval settings).
    settings = getattr(runtime, "settings", None)
    mixed = isinstance(settings, GraphRagSettings) and settings.tg_graph_mix
    return [rag_service(NAME, ERROR, GraphRagRequest,
                        triple_retriever(Fusion.of(settings) if mixed else None))]


# document-embeddings and lexical-search: for mixed retrieval's chunk search.
SPEC = ProcessorSpec(NAME, GraphRagSettings, services,
                     uses=("prompt", "embeddings", "graph-embeddings", "subgraph",
                           "document-embeddings", "lexical-search"))
