"""The triples of an expanded subgraph ranked by relevance to the question, not in
the order the expansion reached them (HippoRAG's personalised PageRank, LightRAG's
"mix" of graph and chunk evidence). Three rankings, fused by reciprocal rank
(fusion.py):

* ``seed``: how near the triple is to a seed entity, weighted by how near that seed
  is to the question (its similarity halved per hop);
* ``pagerank``: the personalised PageRank mass of its two ends, restarting at the
  seeds in proportion to their similarity (networkx);
* ``chunk``: the rank, among the chunks that best match the question (hybrid
  search), of the chunk the triple was extracted from; triples from other chunks
  are not in this ranking.
"""
from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx

from trustgraph.schema import Evidence, ScoredEntity, Term

from ..fusion import Ranking, fuse

HOP_DECAY = 0.5  # a seed's weight per hop away


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
    graph = nx.Graph()
    for e in evidence:
        graph.add_edge(_node(e.triple.s), _node(e.triple.o))
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
    fused = fuse(rankings, key=lambda n: n, score=lambda n: 0.0, k=k)
    return [RankedTriple(evidence[entry.item], _scores(
        seed[entry.item], min(hops.get(end, 99) for end in ends(entry.item)),
        rank[entry.item], chunk_ranks.get(evidence[entry.item].chunk_id), entry.fused))
        for entry in fused]


def _node(term: Term) -> str:
    return f"{term.t}:{term.value}"


def _seed_nearness(graph: nx.Graph, seeds: Sequence[ScoredEntity]
                   ) -> tuple[dict[str, float], dict[str, int]]:
    """Per node: the best seed similarity decayed by hops, and the fewest hops to a
    seed."""
    nearness: dict[str, float] = {}
    hops: dict[str, int] = {}
    for seed in seeds:
        start = _node(seed.entity)
        if start not in graph:
            continue
        for node, distance in nx.single_source_shortest_path_length(graph, start,
                                                                    cutoff=4).items():
            nearness[node] = max(nearness.get(node, 0.0),
                                 max(seed.score, 1e-6) * HOP_DECAY ** distance)
            hops[node] = min(hops.get(node, distance), distance)
    return nearness, hops


def _pagerank(graph: nx.Graph, seeds: Sequence[ScoredEntity]) -> dict[str, float]:
    restart = {_node(s.entity): max(s.score, 1e-6) for s in seeds if _node(s.entity) in graph}
    if not restart:
        return {}
    return nx.pagerank(graph, alpha=0.85, personalization=restart)


def _scores(seed: float, hops: int, pagerank: float, chunk_rank: int | None,
            fused: float) -> dict[str, float]:
    scores = {"seed": round(seed, 6), "hops": hops, "pagerank": round(pagerank, 6),
              "fused": round(fused, 6)}
    if chunk_rank is not None:
        scores["chunk"] = chunk_rank
    return scores
