"""Processor ``graph-rag`` (docs/retrieval.md): the entities nearest the question
(and its rewrite and sub-questions) seed one ``subgraph`` request to the triples
store, which expands them hop by hop within the request's limits; the triples found
become labelled statements, answered from with ``kg-prompt``.

Sources are the triples given to the LLM, one each: ``s``/``p``/``o`` as stored,
``text`` the statement as the LLM saw it, ``id``/``document_id`` the chunk and
document the triple was extracted from.
"""
from typing import Any

from trustgraph.base import Clients, ProcessorSettings, ProcessorSpec
from trustgraph.schema import (RDFS_LABEL, Evidence, GraphRagRequest, ScoredEntity, Source,
                               SubgraphRequest, SubgraphResponse, Term)

from ..answer import Found, rag_service
from ..search import merge_rankings, search_vectors
from ..steps import step

NAME = "graph-rag"
ERROR = f"{NAME}-error"
TEMPLATE = "kg-prompt"


async def retrieve_triples(request: GraphRagRequest, searches: list[str],
                           clients: Clients) -> Found:
    seeds = await seed_entities(request, searches, clients)
    if not seeds:  # nothing in the collection: answered from no statements
        return Found(sources=[], template=TEMPLATE, variables=kg_variables(request.query, []))
    subgraph = await clients.get("subgraph")
    with step(ERROR, "expanding the subgraph"):
        graph = await subgraph.call(SubgraphRequest(
            user=request.user, collection=request.collection,
            seeds=[seed.entity for seed in seeds], max_path_length=request.max_path_length,
            max_entities=request.entity_limit, max_subgraph_size=request.max_subgraph_size,
            triple_limit=request.triple_limit), SubgraphResponse)
    # The store's labels, else the label the entity was embedded with.
    labels = {seed.entity.value: seed.label for seed in seeds if seed.label}
    labels.update(graph.labels or {})
    # A label triple's object is already how its subject reads in every statement.
    used = [e for e in graph.triples or [] if e.triple.p.value != RDFS_LABEL]
    statements = [statement(e, labels) for e in used]
    sources = [Source(id=e.chunk_id, document_id=e.document_id, text=" | ".join(words),
                      s=e.triple.s, p=e.triple.p, o=e.triple.o)
               for e, words in zip(used, statements)]
    return Found(sources=sources, template=TEMPLATE,
                 variables=kg_variables(request.query, statements))


async def seed_entities(request: GraphRagRequest, searches: list[str],
                        clients: Clients) -> list[ScoredEntity]:
    """At most ``entity-limit`` entities, each search contributing its nearest."""
    found = await search_vectors(clients, searches, "graph-embeddings", request,
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
    return labels.get(term.i, term.i) if term.is_iri else term.v


SPEC = ProcessorSpec(NAME, ProcessorSettings,
                     lambda runtime: [rag_service(NAME, ERROR, GraphRagRequest,
                                                   retrieve_triples)],
                     uses=("prompt", "embeddings", "graph-embeddings", "subgraph"))
