"""Reciprocal-rank fusion (Cormack, Clarke & Büttcher 2009): rankings from different
retrievers merged by rank alone, so scores on different scales (cosine similarity,
BM25) need no calibration. An item's fused score is the sum, over the rankings that
hold it, of ``weight / (k + rank)`` (rank from 1)."""
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Ranking(Generic[T]):
    """One retriever's answer to one search text, best first."""

    retriever: str  # "vector", "lexical", …: names the score kept for each item
    items: Sequence[T]
    text: int = 0  # which search text it answers (the question, a sub-question, …)


@dataclass
class Fused(Generic[T]):
    item: T  # as the first ranking that held it returned it
    fused: float = 0.0
    scores: dict[str, float] = field(default_factory=dict)  # best score per retriever
    ranks: dict[str, int] = field(default_factory=dict)  # best rank per retriever


def fuse(rankings: Sequence[Ranking[T]], key: Callable[[T], Hashable],
         score: Callable[[T], float], k: float = 60.0,
         weights: dict[str, float] | None = None, limit: int | None = None
         ) -> list[Fused[T]]:
    """The items of every ranking, each once, best fused score first (ties: the
    order first seen). ``weights`` per retriever (default 1)."""
    weights = weights or {}
    found: dict[Hashable, Fused[T]] = {}
    for ranking in rankings:
        weight = weights.get(ranking.retriever, 1.0)
        for rank, item in enumerate(ranking.items, 1):
            entry = found.setdefault(key(item), Fused(item))
            entry.fused += weight / (k + rank)
            name = ranking.retriever
            if name not in entry.scores or score(item) > entry.scores[name]:
                entry.scores[name] = score(item)
            entry.ranks[name] = min(entry.ranks.get(name, rank), rank)
    ordered = sorted(found.values(), key=lambda entry: -entry.fused)
    return ordered if limit is None else ordered[:limit]
