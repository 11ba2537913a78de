"""The part of the graph a question touches (docs/lazy-rag.md, steps 1–2).

Seeds are found two ways at once: the entities whose vectors are nearest the
question's, and the entities the question names exactly (a 1–3 word window of it
whose entity IRI the store holds: one ``subgraph`` probe for all windows). From the
seeds, one ``subgraph`` request expands ``max_hops`` hops, one store round trip per
hop. The store's budget is generous; the cut to ``max_entities`` is made here,
keeping the entities fewest hops from a seed (seeds first, exact matches first among
them), so the cut never drops a near entity for a far one.
"""
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import islice

from trustgraph.base import Clients
from trustgraph.base.steps import concurrently, step
from trustgraph.extract.vocabulary import CHUNK, DOCUMENT
from trustgraph.schema import (
    RDFS_LABEL,
    Evidence,
    GraphEmbeddingsResponse,
    LazyEntity,
    LazyRagExpandRequest,
    ScoredEntity,
    SubgraphRequest,
    SubgraphResponse,
    Term,
    Triple,
)

from ..search import embed, search_vectors
from .phrases import windows

ERROR = "lazy-rag-error"
VECTOR_SEEDS = 10
# Vector matches this far below the best one are left out: a collection always has
# nearest entities, near or not, and a far seed spends the entity budget on noise.
RELATIVE_SIMILARITY = 0.75
MAX_CANDIDATES = 60  # question windows probed for an exact match
STORE_ENTITY_FACTOR = 2  # chunk nodes and far entities the store may reach, cut here
MAX_STORE_ENTITIES = 1000
TRIPLES_PER_ENTITY = 10  # followed per entity per hop (hubs are sampled, not walked whole)
TRIPLES_PER_STORE_ENTITY = 3  # kept by the store, per entity of its budget
RELATIONSHIPS_PER_ENTITY = 3


@dataclass(frozen=True)
class Seed:
    iri: str
    label: str
    score: float  # 1 for an exact match, else the vector match's cosine similarity
    exact: bool


@dataclass
class Subgraph:
    seeds: list[Seed]
    entities: list[LazyEntity]  # nearest first
    evidence: list[Evidence]  # the relationships among them
    labels: dict[str, str] = field(default_factory=dict)  # IRI → label

    def name(self, term: Term) -> str:
        return self.labels.get(term.value, term.value) if term.is_iri else term.value

    def statement(self, triple: Triple) -> tuple[str, str, str]:
        return self.name(triple.s), self.name(triple.p), self.name(triple.o)


def is_entity(iri: str) -> bool:
    """An IRI naming an entity, not one of extraction's chunk or document nodes."""
    return not iri.startswith((CHUNK, DOCUMENT))


async def find_subgraph(request: LazyRagExpandRequest, max_entities: int, max_hops: int,
                        clients: Clients) -> Subgraph:
    seeds = await find_seeds(request, clients)
    if not seeds:
        return Subgraph([], [], [])
    subgraph = await clients.get("subgraph")
    budget = min(MAX_STORE_ENTITIES, STORE_ENTITY_FACTOR * max_entities + len(seeds))
    with step(ERROR, "expanding the subgraph"):
        found = await subgraph.call(SubgraphRequest(
            user=request.user, collection=request.collection,
            seeds=[Term.iri(s.iri) for s in seeds], max_path_length=max_hops,
            max_entities=budget, max_subgraph_size=budget * TRIPLES_PER_STORE_ENTITY,
            triple_limit=TRIPLES_PER_ENTITY), SubgraphResponse)
    labels = {s.iri: s.label for s in seeds if s.label}
    labels.update(found.labels or {})
    return select(seeds, found.triples or [], labels, max_entities)


async def find_seeds(request: LazyRagExpandRequest, clients: Clients) -> list[Seed]:
    """Exact matches first (longest window first), then vector matches, each once."""
    candidates = list(dict.fromkeys(iri for w in windows(request.query) for iri in w.iris))
    vectors, exact = await concurrently(_nearest(request, clients),
                                        _probe(request, candidates[:MAX_CANDIDATES], clients))
    seeds = {iri: Seed(iri, label, 1.0, True) for iri, label in exact.items()}
    matches = [m for m in (vectors[0].entities or []) if m.entity.is_iri] if vectors else []
    best = max((m.score for m in matches), default=0.0)
    for match in matches:
        if match.entity.i not in seeds and match.score >= best * RELATIVE_SIMILARITY:
            seeds[match.entity.value] = _vector_seed(match)
    return list(seeds.values())


async def _nearest(request: LazyRagExpandRequest,
                   clients: Clients) -> list[GraphEmbeddingsResponse]:
    """The graph-embeddings answer for the question's vector."""
    vectors = await embed(clients, [request.query], ERROR)
    return await search_vectors(clients, vectors, "graph-embeddings", request,
                                VECTOR_SEEDS, ERROR)


def _vector_seed(match: ScoredEntity) -> Seed:
    return Seed(match.entity.value, match.label, match.score, False)


async def _probe(request: LazyRagExpandRequest, candidates: list[str],
                 clients: Clients) -> dict[str, str]:
    """The candidates the store holds, with their labels, in candidate order: a
    one-hop ``subgraph`` request kept to one triple answers with every seed's label."""
    if not candidates:
        return {}
    subgraph = await clients.get("subgraph")
    with step(ERROR, "matching the question's phrases to entities"):
        found = await subgraph.call(SubgraphRequest(
            user=request.user, collection=request.collection,
            seeds=[Term.iri(iri) for iri in candidates], max_path_length=1,
            max_entities=len(candidates), max_subgraph_size=1, triple_limit=1),
            SubgraphResponse)
    labels = found.labels or {}
    return {iri: labels[iri] for iri in candidates if iri in labels}


def select(seeds: list[Seed], evidence: list[Evidence], labels: dict[str, str],
           max_entities: int) -> Subgraph:
    """The ``max_entities`` entities fewest hops from a seed, and the triples among
    them (and their literal values), at most ``RELATIONSHIPS_PER_ENTITY`` each."""
    kept = [e for e in evidence if e.triple.p.i != RDFS_LABEL]
    hops = distances([s.iri for s in seeds], (e.triple for e in kept))
    chosen = list(islice(filter(is_entity, hops), max_entities))
    scores = {s.iri: s.score for s in seeds}
    entities = [LazyEntity(id=iri, label=labels.get(iri, ""), hops=hops[iri],
                           score=round(scores.get(iri, 0.0), 4)) for iri in chosen]
    inside = set(chosen)
    used = [e for e in kept if e.triple.s.i in inside
            and (e.triple.o.i in inside if e.triple.o.is_iri else True)]
    rank = {iri: n for n, iri in enumerate(chosen)}
    used.sort(key=lambda e: max(rank[e.triple.s.value], rank.get(e.triple.o.value, 0)))
    return Subgraph(seeds, entities, used[:RELATIONSHIPS_PER_ENTITY * max_entities], labels)


def distances(seeds: list[str], triples: Iterable[Triple]) -> dict[str, int]:
    """Hops from the nearest seed to every IRI the triples join to one, nearest first
    (seeds in their order, then breadth-first in the triples' order)."""
    links: dict[str, list[str]] = {}
    for t in triples:
        if t.o.is_iri:
            links.setdefault(t.s.value, []).append(t.o.value)
            links.setdefault(t.o.value, []).append(t.s.value)
    found = dict.fromkeys(seeds, 0)
    queue = deque(seeds)
    while queue:
        iri = queue.popleft()
        for other in links.get(iri, ()):
            if other not in found:
                found[other] = found[iri] + 1
                queue.append(other)
    return {iri: hops for iri, hops in found.items() if iri in links or hops == 0}
