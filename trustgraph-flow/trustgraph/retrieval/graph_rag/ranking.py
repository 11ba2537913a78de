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
"""
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass

from trustgraph.schema import Evidence, ScoredEntity, Term

from ..fusion import Ranking, fuse

HOP_DECAY = 0.5  # a seed's weight per hop away
DAMPING, ITERATIONS = 0.85, 30  # PageRank's usual damping; enough rounds to settle
# The chunk ranking counts double: "seed" and "pagerank" both come from the same
# seeds, while a chunk's rank is independent evidence from the words and vectors of
# the text itself.
WEIGHTS = {"seed": 1.0, "pagerank": 1.0, "chunk": 2.0}

Graph = dict[str, set[str]]  # node → neighbours (undirected)


@dataclass
class RankedTriple:
    evidence: Evidence
    scores: dict[str, float]  # "seed", "hops", "pagerank", "chunk" (rank), "fused"


def rank_triples(evidence: Sequence[Evidence], seeds: Sequence[ScoredEntity],
                 chunk_ranks: dict[str, int], k: float = 60.0) -> list[RankedTriple]:
    """``evidence`` best first; ``chunk_ranks``: chunk id → rank (1 = best) of the
    chunks found for the question."""
    if not evidence:
        return []
    graph: Graph = defaultdict(set)
    for e in evidence:
        s, o = _node(e.triple.s), _node(e.triple.o)
        graph[s].add(o)
        graph[o].add(s)
    nearness, hops = _seed_nearness(graph, seeds)
    mass = _pagerank(graph, seeds)
    triples = list(range(len(evidence)))

    def ends(n: int) -> tuple[str, str]:
        return _node(evidence[n].triple.s), _node(evidence[n].triple.o)

    seed = {n: max(nearness.get(end, 0.0) for end in ends(n)) for n in triples}
    rank = {n: sum(mass.get(end, 0.0) for end in ends(n)) for n in triples}
    supported = [n for n in triples if evidence[n].chunk_id in chunk_ranks]
    rankings = [
        Ranking("seed", sorted((n for n in triples if seed[n] > 0), key=lambda n: -seed[n])),
        Ranking("pagerank", sorted(triples, key=lambda n: -rank[n])),
        Ranking("chunk", sorted(supported, key=lambda n: chunk_ranks[evidence[n].chunk_id]))]
    fused = fuse(rankings, key=lambda n: n, score=lambda n: 0.0, k=k, weights=WEIGHTS)
    return [RankedTriple(evidence[entry.item], _scores(
        seed[entry.item], min(hops.get(end, 99) for end in ends(entry.item)),
        rank[entry.item], chunk_ranks.get(evidence[entry.item].chunk_id), entry.fused))
        for entry in fused]


def _node(term: Term) -> str:
    return f"{term.t}:{term.value}"


def _seed_nearness(graph: Graph, seeds: Sequence[ScoredEntity]
                   ) -> tuple[dict[str, float], dict[str, int]]:
    """Per node: the best seed similarity decayed by hops, and the fewest hops to a
    seed."""
    nearness: dict[str, float] = {}
    hops: dict[str, int] = {}
    for seed in seeds:
        start = _node(seed.entity)
        if start not in graph:
            continue
        for node, distance in _distances(graph, start, cutoff=4).items():
            nearness[node] = max(nearness.get(node, 0.0),
                                 max(seed.score, 1e-6) * HOP_DECAY ** distance)
            hops[node] = min(hops.get(node, distance), distance)
    return nearness, hops


def _distances(graph: Graph, start: str, cutoff: int) -> dict[str, int]:
    """Hops from ``start`` to each node within ``cutoff`` (breadth first)."""
    found, queue = {start: 0}, deque([start])
    while queue:
        node = queue.popleft()
        if found[node] == cutoff:
            continue
        for neighbour in graph[node]:
            if neighbour not in found:
                found[neighbour] = found[node] + 1
                queue.append(neighbour)
    return found


def _pagerank(graph: Graph, seeds: Sequence[ScoredEntity]) -> dict[str, float]:
    """Personalised PageRank: a walk that restarts at the seeds, in proportion to
    their similarity to the question."""
    restart = {_node(s.entity): max(s.score, 1e-6) for s in seeds if _node(s.entity) in graph}
    if not restart:
        return {}
    total = sum(restart.values())
    restart = {node: weight / total for node, weight in restart.items()}
    rank = dict(restart)
    for _ in range(ITERATIONS):
        spread: dict[str, float] = defaultdict(float)
        for node, mass in rank.items():
            for neighbour in graph[node]:
                spread[neighbour] += DAMPING * mass / len(graph[node])
        for node, weight in restart.items():
            spread[node] += (1 - DAMPING) * weight
        rank = spread
    return rank


def _scores(seed: float, hops: int, pagerank: float, chunk_rank: int | None,
            fused: float) -> dict[str, float]:
    scores = {"seed": round(seed, 6), "hops": hops, "pagerank": round(pagerank, 6),
              "fused": round(fused, 6)}
    if chunk_rank is not None:
        scores["chunk"] = chunk_rank
    return scores
