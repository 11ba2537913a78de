"""Rankings from different retrievers merged into one.

* ``fuse``: reciprocal-rank fusion (Cormack, Clarke & Büttcher 2009), by rank alone,
  so scores on different scales (cosine similarity, BM25) need no calibration. An
  item's fused score is the sum, over the rankings that hold it, of
  ``weight / (k + rank)`` (rank from 1).
* ``fuse_scores``: CombSUM of min-max normalised scores (Fox & Shaw 1994): each
  ranking's scores scaled to [0, 1] within that ranking, an item's fused score the
  weighted sum over the rankings that hold it. It keeps how far apart the scores
  are, which ranks throw away: a BM25 match far above the rest wins by more than
  one place (bench/retrieval_lab.py; docs/retrieval.md)."""
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
    def reciprocal(ranking: Ranking[T]) -> list[float]:
        return [1 / (k + rank) for rank in range(1, len(ranking.items) + 1)]
    return _fused(rankings, key, score, reciprocal, weights or {}, limit)


def fuse_scores(rankings: Sequence[Ranking[T]], key: Callable[[T], Hashable],
                score: Callable[[T], float], weights: dict[str, float] | None = None,
                limit: int | None = None) -> list[Fused[T]]:
    """As ``fuse``, by CombSUM of each ranking's min-max normalised scores (its best
    1, its worst 0; all 1 when they are equal)."""
    def normalised(ranking: Ranking[T]) -> list[float]:
        values = [score(item) for item in ranking.items]
        low, high = min(values, default=0.0), max(values, default=0.0)
        return [(v - low) / (high - low) if high > low else 1.0 for v in values]
    return _fused(rankings, key, score, normalised, weights or {}, limit)


def _fused(rankings: Sequence[Ranking[T]], key: Callable[[T], Hashable],
           score: Callable[[T], float], contributions: Callable[[Ranking[T]], list[float]],
           weights: dict[str, float], limit: int | None) -> list[Fused[T]]:
    found: dict[Hashable, Fused[T]] = {}
    for ranking in rankings:
        weight, name = weights.get(ranking.retriever, 1.0), ranking.retriever
        for rank, (item, part) in enumerate(zip(ranking.items, contributions(ranking),
                                                strict=True), 1):
            entry = found.setdefault(key(item), Fused(item))
            entry.fused += weight * part
            if name not in entry.scores or score(item) > entry.scores[name]:
                entry.scores[name] = score(item)
            entry.ranks[name] = min(entry.ranks.get(name, rank), rank)
    ordered = sorted(found.values(), key=lambda entry: -entry.fused)
    return ordered if limit is None else ordered[:limit]
