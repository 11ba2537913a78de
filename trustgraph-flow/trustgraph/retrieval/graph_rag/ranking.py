"""The triples of an expanded subgraph ranked by relevance to the question, not in
the order the expansion reached them (HippoRAG's personalised PageRank, LightRAG's
"mix" of graph and chunk evidence). Three rankings, fused by reciprocal rank
(fusion.py):

* ``seed``: how near the triple is to a seed entity, weighted by how near that seed
  is to the question (its similarity halved per hop);
* ``pagerank``: the personalised PageRank mass of its two ends, restarting at the
  seeds in proportion to their similarity (power iteration: a subgraph is a few
  hundred triples at most, so plain Python is quick and needs no graph library);
* ``chunk``: the rank, among the chunks that best match the question (hybrid
  search), of the chunk the triple was extracted from; triples from other chunks
  are not in this ranking.

``best`` keeps the best of them, each document the chunk search found among them,
and ``by_document`` orders those by the document they are cited from, each
document's definitions first and its co-occurrences last.
"""
import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from trustgraph.extract.vocabulary import CO_OCCURS, DEFINITION
from trustgraph.schema import Evidence, ScoredEntity, Term

from ..fusion import Ranking, fuse

HOP_DECAY = 0.5  # a seed's weight per hop away
MAX_HOPS = 4  # nearness beyond this many hops from every seed counts as none
DAMPING, ITERATIONS = 0.85, 30  # PageRank's usual damping; enough rounds to settle
# The chunk ranking counts double: "seed" and "pagerank" both come from the same
# seeds, while a chunk's rank is independent evidence from the words and vectors of
# the text itself.
WEIGHTS = {"seed": 1.0, "pagerank": 1.0, "chunk": 2.0}
# Within a document, what a statement says before how it ranked: a definition of
# the entity first, then relations, then bare co-occurrence (the keyphrase
# extractor's "A | co-occurs with | B", which a person would not call a fact).
KINDS = {DEFINITION: 0, CO_OCCURS: 2}


@dataclass
class RankedTriple:
    evidence: Evidence
    scores: dict[str, float]  # "seed", "hops", "pagerank", "chunk" (rank), "fused"


@dataclass
class Graph:
    """The subgraph's nodes numbered, its triples as edges between those numbers
    (undirected: each triple joins its subject and object)."""

    nodes: dict[str, int]
    ends: np.ndarray  # per triple: [subject node, object node]
    neighbours: list[list[int]]

    @classmethod
    def of(cls, evidence: Sequence[Evidence]) -> "Graph":
        nodes: dict[str, int] = {}
        ends = np.array([[nodes.setdefault(_node(t), len(nodes)) for t in
                          (e.triple.s, e.triple.o)] for e in evidence], dtype=np.int64)
        neighbours: list[list[int]] = [[] for _ in nodes]
        for s, o in ends.tolist():
            neighbours[s].append(o)
            neighbours[o].append(s)
        return cls(nodes, ends, neighbours)


def rank_triples(evidence: Sequence[Evidence], seeds: Sequence[ScoredEntity],
                 chunk_ranks: dict[str, int], k: float = 60.0) -> list[RankedTriple]:
    """``evidence`` best first; ``chunk_ranks``: chunk id → rank (1 = best) of the
    chunks found for the question."""
    if not evidence:
        return []
    graph = Graph.of(evidence)
    starts: dict[int, float] = {}  # seed node → its similarity (the best, if a seed repeats)
    for s in seeds:
        node = graph.nodes.get(_node(s.entity))
        if node is not None:
            starts[node] = max(starts.get(node, 0.0), max(s.score, 1e-6))
    nearness, hops = _seed_nearness(graph, starts)
    mass = _pagerank(graph, starts)
    seed = nearness[graph.ends].max(axis=1).tolist()
    rank = mass[graph.ends].sum(axis=1).tolist()
    hop = hops[graph.ends].min(axis=1).tolist()
    triples = range(len(evidence))
    supported = [n for n in triples if evidence[n].chunk_id in chunk_ranks]
    rankings = [
        Ranking("seed", sorted((n for n in triples if seed[n] > 0), key=lambda n: -seed[n])),
        Ranking("pagerank", sorted(triples, key=lambda n: -rank[n])),
        Ranking("chunk", sorted(supported, key=lambda n: chunk_ranks[evidence[n].chunk_id]))]
    fused = fuse(rankings, key=lambda n: n, score=lambda n: 0.0, k=k, weights=WEIGHTS)
    return [RankedTriple(evidence[n], _scores(seed[n], hop[n], rank[n],
                                              chunk_ranks.get(evidence[n].chunk_id),
                                              entry.fused))
            for entry in fused for n in (entry.item,)]


def best(ranked: Sequence[RankedTriple], size: int, document_ranks: dict[str, int]
         ) -> list[RankedTriple]:
    """The best ``size`` of ``ranked``, in ranked order, the best triple of each
    document of ``document_ranks`` (document id → the rank of its best chunk among
    those found for the question) among them, as many as ``size`` holds, best
    first. So graph mode cites every document the chunk search found that the
    subgraph holds evidence from, however the graph ranks its triples, and leads
    with them (``by_document``)."""
    firsts: dict[str, int] = {}
    for n, r in enumerate(ranked):
        if r.evidence.document_id in document_ranks:
            firsts.setdefault(r.evidence.document_id, n)
    kept = set(sorted(firsts.values(),
                      key=lambda n: document_ranks[ranked[n].evidence.document_id])[:size])
    for n in range(len(ranked)):
        if len(kept) >= size:
            break
        kept.add(n)
    return [ranked[n] for n in sorted(kept)]


def by_document(ranked: Sequence[RankedTriple], document_ranks: dict[str, int]
                ) -> list[RankedTriple]:
    """``ranked`` grouped by the document each triple is cited from: first the
    documents of ``document_ranks`` (document id → the rank of its best chunk among
    those found for the question), best first, then the others in the order of their
    best triple; each document's triples in ranked order. Sources and statements then
    lead with the documents the question matches best, whose triples ranking alone
    scatters among those of documents only the graph reaches."""
    first: dict[str, int] = {}
    for n, r in enumerate(ranked):
        first.setdefault(r.evidence.document_id, n)

    def key(item: tuple[int, RankedTriple]) -> tuple[float, int, int, int]:
        n, r = item
        document = r.evidence.document_id
        return (document_ranks.get(document, math.inf), first[document],
                KINDS.get(r.evidence.triple.p.value, 1), n)
    return [r for _, r in sorted(enumerate(ranked), key=key)]


def _node(term: Term) -> str:
    return f"{term.t}:{term.value}"


def _seed_nearness(graph: Graph, starts: dict[int, float]) -> tuple[np.ndarray, np.ndarray]:
    """Per node: the best seed similarity decayed by hops (within ``MAX_HOPS``), and
    the fewest hops to a seed (99: none within reach). One best-first pass from all
    seeds at once: as every hop decays by the same factor, a node is final when
    first taken from the queue."""
    nearness = np.zeros(len(graph.nodes))
    hops = np.full(len(graph.nodes), 99, dtype=np.int64)
    queue = [(-score, 0, node) for node, score in starts.items()]
    heapq.heapify(queue)
    done = set()
    while queue:
        negative, distance, node = heapq.heappop(queue)
        if node in done:
            continue
        done.add(node)
        nearness[node] = -negative
        if distance < MAX_HOPS:
            for neighbour in graph.neighbours[node]:
                if neighbour not in done:
                    heapq.heappush(queue, (negative * HOP_DECAY, distance + 1, neighbour))
    # Fewest hops, whichever seed: breadth first from all seeds together.
    frontier, distance = list(starts), 0
    while frontier and distance <= MAX_HOPS:
        reached = []
        for node in frontier:
            if hops[node] == 99:
                hops[node] = distance
                reached.extend(graph.neighbours[node])
        frontier, distance = [n for n in reached if hops[n] == 99], distance + 1
    return nearness, hops


def _pagerank(graph: Graph, starts: dict[int, float]) -> np.ndarray:
    """Personalised PageRank: a walk that restarts at the seeds, in proportion to
    their similarity to the question (power iteration over the edge list)."""
    size = len(graph.nodes)
    if not starts:
        return np.zeros(size)
    restart = np.zeros(size)
    restart[list(starts)] = list(starts.values())
    restart /= restart.sum()
    # Both directions of every edge: a walk may go subject → object or back.
    source = np.concatenate([graph.ends[:, 0], graph.ends[:, 1]])
    target = np.concatenate([graph.ends[:, 1], graph.ends[:, 0]])
    share = DAMPING / np.bincount(source, minlength=size)[source]
    rank = restart.copy()
    for _ in range(ITERATIONS):
        rank = np.bincount(target, rank[source] * share, minlength=size) \
            + (1 - DAMPING) * restart
    return rank


def _scores(seed: float, hops: int, pagerank: float, chunk_rank: int | None,
            fused: float) -> dict[str, float]:
    scores = {"seed": round(seed, 6), "hops": hops, "pagerank": round(pagerank, 6),
              "fused": round(fused, 6)}
    if chunk_rank is not None:
        scores["chunk"] = chunk_rank
    return scores
