"""Leiden communities of the weighted entity graph (``leidenalg`` on ``igraph``),
hierarchical, from the graph alone (no LLM, no summaries); and the child process that
computes them: ``python -m trustgraph.retrieval.lazy_rag.leiden VERSION PREFIX...``
reads the entity graph's ``graph-edges`` pages on stdin (``pages.py``; IRIs starting
with a PREFIX are not entities) and writes the ``Communities`` as JSON on stdout
(``worker.py`` runs it).

Level 0 is the finest: Leiden maximising modularity (resolution 1) on the whole
entity graph, run by igraph's own Leiden (C core): on a 20k-entity / 80k-edge graph
it took 1.1 s where ``leidenalg`` took 33 s for the same modularity (0.343 vs 0.344,
same loaded 2-core machine), and the whole graph is where the time goes. Each next
level runs ``leidenalg`` on the graph of the level below's communities (a few hundred
nodes at most; edge weights summed) with half the resolution, so communities merge
into broader ones; levels stop when nothing merges or at ``MAX_LEVELS``. Seeded, so
the same graph gives the same communities.
"""
import json
import os
import random
import sys
from collections import defaultdict
from collections.abc import Mapping

import igraph
import leidenalg
import numpy as np

from .communities import Communities
from .pages import read_graph

MAX_LEVELS = 3
SEED = 42
TOP_MEMBERS = 8  # members kept per community, best connected first
TOP_RELATIONS = 6  # edges kept per community, heaviest first
NICENESS = 10  # answering questions comes first


def detect(version: int, weights: Mapping[tuple[str, str], int],
           labels: Mapping[str, str]) -> Communities:
    """Communities of the undirected graph of ``weights`` ((IRI, IRI) → weight; a
    pair given both ways adds up)."""
    index: dict[str, int] = {}
    edges = [(index.setdefault(s, len(index)), index.setdefault(o, len(index)), w)
             for (s, o), w in weights.items()]
    nodes = list(index)
    if not nodes:
        return Communities(version, [], {}, [], [], {}, {})
    graph = igraph.Graph(n=len(nodes), edges=[(s, o) for s, o, _ in edges], directed=False)
    graph.es["weight"] = [w for _, _, w in edges]
    graph.simplify(multiple=True, loops=True, combine_edges="sum")
    levels = _hierarchy(graph)
    sizes = np.bincount(np.asarray(levels[0]), minlength=max(levels[0]) + 1).tolist()
    members, relations = _describe(graph, levels[0])
    shown = {n for kept in members.values() for n in kept} | {
        n for kept in relations.values() for s, o, _ in kept for n in (s, o)}
    named = {n: labels[nodes[n]] for n in sorted(shown) if nodes[n] in labels}
    return Communities(version, nodes, named, levels, sizes, members, relations)


def _hierarchy(graph: igraph.Graph) -> list[list[int]]:
    random.seed(SEED)  # igraph draws from Python's generator
    partition = graph.community_leiden(objective_function="modularity", weights="weight",
                                       resolution=1.0, n_iterations=2)
    levels = [list(partition.membership)]
    resolution = 1.0
    while len(levels) < MAX_LEVELS:
        resolution /= 2
        coarse = partition.cluster_graph(combine_edges="sum")
        partition = leidenalg.find_partition(
            coarse, leidenalg.RBConfigurationVertexPartition, weights="weight",
            resolution_parameter=resolution, seed=SEED)
        merged = partition.membership
        if len(set(merged)) >= coarse.vcount():  # nothing merged: the hierarchy's top
            break
        levels.append([merged[c] for c in levels[-1]])
    return levels


def _describe(graph: igraph.Graph, membership: list[int]
              ) -> tuple[dict[int, list[int]], dict[int, list[tuple[int, int, int]]]]:
    """Each community's best-connected members (weighted degree inside it) and its
    heaviest inner edges."""
    pairs = np.asarray(graph.get_edgelist(), dtype=np.int64).reshape(-1, 2)
    weights = np.asarray(graph.es["weight"] if graph.ecount() else [], dtype=np.int64)
    community = np.asarray(membership)
    inner = community[pairs[:, 0]] == community[pairs[:, 1]] if len(pairs) else \
        np.zeros(0, dtype=bool)
    degree = np.zeros(len(membership), dtype=np.int64)
    np.add.at(degree, pairs[inner, 0], weights[inner])
    np.add.at(degree, pairs[inner, 1], weights[inner])
    members: dict[int, list[int]] = defaultdict(list)
    for node in np.lexsort((np.arange(len(degree)), -degree)):  # heaviest, then first
        kept = members[int(community[node])]
        if len(kept) < TOP_MEMBERS:
            kept.append(int(node))
    relations: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for e in np.flatnonzero(inner)[np.argsort(-weights[inner], kind="stable")]:
        ties = relations[int(community[pairs[e, 0]])]
        if len(ties) < TOP_RELATIONS:
            ties.append((int(pairs[e, 0]), int(pairs[e, 1]), int(weights[e])))
    return dict(members), dict(relations)


def main() -> None:
    os.nice(NICENESS)
    version, not_entities = int(sys.argv[1]), tuple(sys.argv[2:])
    weights, labels = read_graph(sys.stdin.buffer, not_entities)
    found = detect(version, weights, labels)
    sys.stdout.write(json.dumps(found.to_json()))


if __name__ == "__main__":
    main()
