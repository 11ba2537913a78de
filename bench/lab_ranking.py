"""bench.retrieval_lab's rankings (chunk row, score; best first) and what it does with
them: the first stage (dense, lexical), fusion, late interaction (MaxSim) and
pseudo-relevance feedback, each scored by where the expected document ranks."""
import asyncio
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench.lab_corpus import COLLECTION, DEPTH, USER, Index, Query
from trustgraph.storage.vectors.lexical import STOPWORDS

# -- rankings: (chunk row, score) best first ------------------------------------------

Ranked = list[tuple[int, float]]


@dataclass
class Asked:
    """One question's first-stage rankings, deep enough for every setting."""

    query: Query
    vector: np.ndarray  # the question's vector
    dense: Ranked
    raw: Ranked  # over the vectors of the chunks' own text
    lexical: dict[str, Ranked]  # per BM25 weight setting


def dense_ranking(index: Index, vector: np.ndarray, depth: int,
                  vectors: np.ndarray | None = None) -> Ranked:
    scores = (index.vectors if vectors is None else vectors) @ vector
    top = np.argsort(-scores)[:depth]
    return [(int(r), float(scores[r])) for r in top]


def lexical_ranking(index: Index, text: str, depth: int,
                    weights: dict[str, float] | None = None) -> Ranked:
    rows = {c.id: n for n, c in enumerate(index.chunks)}
    found = asyncio.run(index.fts(weights).search(USER, COLLECTION, text, depth))
    return [(rows[m.chunk_id], m.score) for m in found]


def doc_rank(index: Index, ranking: Sequence[int], expected: str) -> int | None:
    """The rank of the expected document among the documents of these chunks (each
    once, first place), within ``DEPTH``."""
    docs = list(dict.fromkeys(index.chunks[r].document for r in ranking))[:DEPTH]
    return docs.index(expected) + 1 if expected in docs else None


def scores_of(ranks: list[int | None]) -> dict[str, float]:
    n = len(ranks)
    return {"R@1": sum(1 for r in ranks if r == 1) / n,
            "R@5": sum(1 for r in ranks if r is not None and r <= 5) / n,
            "R@10": sum(1 for r in ranks if r is not None) / n,
            "MRR": sum(1 / r for r in ranks if r is not None) / n}


# -- fusion ------------------------------------------------------------------------

def rrf(rankings: Sequence[tuple[Ranked, float]], k: float) -> list[int]:
    fused: dict[int, float] = {}
    for ranking, weight in rankings:
        for rank, (row, _) in enumerate(ranking, 1):
            fused[row] = fused.get(row, 0.0) + weight / (k + rank)
    return sorted(fused, key=lambda r: -fused[r])


def normalised(ranking: Ranked, how: str) -> dict[int, float]:
    if not ranking:
        return {}
    values = np.array([s for _, s in ranking])
    if how == "minmax":
        low, high = values.min(), values.max()
        scaled = (values - low) / (high - low) if high > low else np.ones_like(values)
    elif how == "z":
        spread = values.std() or 1.0
        scaled = (values - values.mean()) / spread
    elif how == "max":  # divided by the best: 0 stays 0 (BM25), keeps the spread
        scaled = values / (values.max() or 1.0)
    else:
        raise ValueError(how)
    return {row: float(v) for (row, _), v in zip(ranking, scaled, strict=True)}


def comb(rankings: Sequence[tuple[Ranked, float]], how: str, mnz: bool = False,
         floor: str = "zero") -> dict[int, float]:
    """CombSUM (or CombMNZ) of normalised scores; an item a ranking misses scores
    0 there (``floor='zero'``) or that ranking's lowest (``'min'``)."""
    parts = [(normalised(r, how), w) for r, w in rankings]
    rows = {row for scores, _ in parts for row in scores}
    fused = {}
    for row in rows:
        total, hits = 0.0, 0
        for scores, weight in parts:
            if row in scores:
                total, hits = total + weight * scores[row], hits + 1
            elif floor == "min" and scores:
                total += weight * min(scores.values())
        fused[row] = total * (hits if mnz else 1)
    return fused


def order(scores: dict[int, float]) -> list[int]:
    return sorted(scores, key=lambda r: -scores[r])


def by_document(index: Index, scores: dict[int, float], how: str) -> list[int]:
    """Chunks in the order of their documents' scores (document-level fusion): a
    document scores its best chunk ("max"), or the sum of its chunks ("sum")."""
    docs: dict[str, list[float]] = {}
    for row, score in scores.items():
        docs.setdefault(index.chunks[row].document, []).append(score)
    value = {d: (max(v) if how == "max" else sum(v)) for d, v in docs.items()}
    return sorted(scores, key=lambda r: (-value[index.chunks[r].document], -scores[r]))


# -- late interaction ---------------------------------------------------------------

def maxsim(query: np.ndarray, doc: np.ndarray) -> float:
    """ColBERT's MaxSim: each query token's best cosine among the document's tokens,
    averaged over the query tokens."""
    if not len(query) or not len(doc):
        return 0.0
    return float((query @ doc.T).max(axis=1).mean())


def maxsim_rerank(index: Index, query_tokens: np.ndarray, candidates: list[int],
                  top: int, blend: float | None) -> list[int]:
    """The first ``top`` candidates reordered by MaxSim (``blend`` None), or by RRF of
    their MaxSim rank and their first-stage rank (k 60) with MaxSim weighted
    ``blend``; the rest after them."""
    head = candidates[:top]
    tokens = index.chunk_tokens(head)
    sims = [maxsim(query_tokens, t) for t in tokens]
    if blend is None:
        ordered = [head[i] for i in np.argsort(-np.array(sims), kind="stable")]
    else:
        by_sim = {head[i]: rank for rank, i in enumerate(np.argsort(-np.array(sims),
                                                                      kind="stable"), 1)}
        score = {row: 1 / (60 + place) + blend / (60 + by_sim[row])
                 for place, row in enumerate(head, 1)}
        ordered = sorted(head, key=lambda r: -score[r])
    return ordered + candidates[top:]


# -- pseudo-relevance feedback --------------------------------------------------------

def dense_prf(index: Index, asked: Asked, top: int, beta: float, depth: int) -> Ranked:
    """Rocchio on the vectors: the question's vector plus ``beta`` × the mean of its
    ``top`` nearest chunks' vectors, searched again."""
    rows = [r for r, _ in asked.dense[:top]]
    moved = asked.vector + beta * index.vectors[rows].mean(axis=0)
    return dense_ranking(index, moved / np.linalg.norm(moved), depth)


def lexical_prf(index: Index, asked: Asked, top: int, terms: int, depth: int,
                document_frequency: dict[str, int]) -> Ranked:
    """RM3-like on the words: the ``terms`` words of the first ``top`` lexical
    chunks with the best tf·idf, added to the question, searched again."""
    counts: dict[str, float] = {}
    n = len(index.chunks)
    for row, _ in asked.lexical["default"][:top]:
        words = [w for w in re.findall(r"[a-z][a-z0-9]+", index.chunks[row].text.lower())
                 if w not in STOPWORDS]
        for word in set(words):
            counts[word] = counts.get(word, 0) + words.count(word) / len(words) * \
                math.log(n / (1 + document_frequency.get(word, 0)))
    extra = sorted(counts, key=lambda w: -counts[w])[:terms]
    return lexical_ranking(index, f"{asked.query.text} {' '.join(extra)}", depth)
