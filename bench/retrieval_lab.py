"""``python -m bench.retrieval_lab``: ranking techniques compared offline, in seconds.

The stack's own pieces in this process — the decoder's chunker, the title-prefixed
chunk text the chunk stage embeds, all-MiniLM-L6-v2 on onnxruntime, the FTS5 BM25
index — build the same chunks, vectors and index as a loaded stack, without the bus.
Vector search is exact cosine (Qdrant Edge's unindexed search is exact too), so the
figures of the plain settings match ``bench.retrieval``'s through the API; they are
the place to try fusion settings, field weights, late interaction and feedback on
both corpora before a technique is built into the services and measured there.

Corpora: ``stdlib`` (bench.retrieval's docstrings, 363 questions) and ``articles``
(bench/articles.py: 2,000 encyclopedia leads; question sets ``sentence``, verbatim,
and ``description``, not). Vectors and token states are cached in ``--cache``.
"""
import argparse
import re
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

from bench.lab_corpus import CORPORA, Corpus, Index, Query, build, save
from bench.lab_ranking import (
    Asked,
    Ranked,
    by_document,
    comb,
    dense_prf,
    dense_ranking,
    doc_rank,
    lexical_prf,
    lexical_ranking,
    maxsim,
    maxsim_rerank,
    order,
    rrf,
    scores_of,
)

# -- the settings compared ------------------------------------------------------------

FIELD_WEIGHTS = {"default": None, "title1": {"title": 1.0, "headings": 1.0},
                 "title4": {"title": 4.0, "headings": 2.0},
                 "title8": {"title": 8.0, "headings": 3.0}}


def ask_all(index: Index, queries: list[Query], depth: int) -> list[Asked]:
    vectors = index.model.embed([q.text for q in queries])
    return [Asked(q, v, dense_ranking(index, v, depth),
                  dense_ranking(index, v, depth, index.raw_vectors),
                  {name: lexical_ranking(index, q.text, depth, weights)
                   for name, weights in FIELD_WEIGHTS.items()})
            for q, v in zip(queries, vectors, strict=True)]


def first_stage_ms(index: Index, queries: list[Query]) -> dict[str, float]:
    """What every setting pays before its own work, per question, in this process:
    embedding the question (one at a time, as a request does), the exact cosine
    search, one FTS5 search."""
    sample = queries[:50]
    started = time.perf_counter()
    vectors = [index.model.embed([q.text])[0] for q in sample]
    embedded = time.perf_counter()
    for vector in vectors:
        dense_ranking(index, vector, 50)
    searched = time.perf_counter()
    for q in sample:
        lexical_ranking(index, q.text, 50)
    done = time.perf_counter()
    return {"embed": (embedded - started) * 1e3 / len(sample),
            "vector search": (searched - embedded) * 1e3 / len(sample),
            "lexical search": (done - searched) * 1e3 / len(sample)}


def maxsim_on_the_fly_ms(index: Index, asked: list[Asked], top: int) -> float:
    """Late interaction without stored token states: the question's and the first
    ``top`` candidates' token states computed at query time (one model run each)."""
    sample = asked[:20]
    started = time.perf_counter()
    for a in sample:
        query = index.model.token_vectors([a.query.text])[0]
        rows = [r for r, _ in a.dense[:top]]
        states = index.model.token_vectors([index.chunks[r].embedded for r in rows])
        [maxsim(query, t) for t in states]
    return (time.perf_counter() - started) * 1e3 / len(sample)


Setting = Callable[[Asked], list[int]]  # a question's chunk rows, best first


def rows(ranking: Ranked) -> list[int]:
    return [r for r, _ in ranking]


class Methods:
    """The ranking methods the settings are made of, each a function of one question."""

    def __init__(self, index: Index, frequency: dict[str, int],
                 query_tokens: dict[str, np.ndarray]) -> None:
        self.index = index
        self.frequency = frequency
        self.query_tokens = query_tokens  # a question's token states, computed once

    def hybrid(self, a: Asked, depth: int = 10, k: float = 60, wv: float = 1,
               wl: float = 1, field: str = "default") -> list[int]:
        return rrf([(a.dense[:depth], wv), (a.lexical[field][:depth], wl)], k)

    def combined(self, a: Asked, depth: int, alpha: float, how: str = "minmax",
                 mnz: bool = False, docs: str | None = None) -> list[int]:
        scores = comb([(a.dense[:depth], alpha), (a.lexical["default"][:depth], 1 - alpha)],
                      how, mnz)
        return by_document(self.index, scores, docs) if docs else order(scores)

    def rrf_docs(self, a: Asked, depth: int, how: str) -> list[int]:
        fused: dict[int, float] = {}
        for ranking in (a.dense[:depth], a.lexical["default"][:depth]):
            for rank, (row, _) in enumerate(ranking, 1):
                fused[row] = fused.get(row, 0.0) + 1 / (60 + rank)
        return by_document(self.index, fused, how)

    def tokens(self, a: Asked) -> np.ndarray:
        if a.query.text not in self.query_tokens:
            self.query_tokens[a.query.text] = self.index.model.token_vectors([a.query.text])[0]
        return self.query_tokens[a.query.text]

    def lexical(self, a: Asked, field: str = "default") -> list[int]:
        return rows(a.lexical[field][:10])

    def hybrid_maxsim(self, a: Asked, top: int, blend: float | None) -> list[int]:
        return maxsim_rerank(self.index, self.tokens(a), self.hybrid(a, depth=top), top, blend)

    def vector_maxsim(self, a: Asked) -> list[int]:
        return maxsim_rerank(self.index, self.tokens(a), rows(a.dense[:10]), 10, None)

    def vector_prf(self, a: Asked, top: int, beta: float) -> list[int]:
        return rows(dense_prf(self.index, a, top, beta, 10))

    def hybrid_vector_prf(self, a: Asked, top: int, beta: float) -> list[int]:
        return rrf([(dense_prf(self.index, a, top, beta, 10), 1),
                    (a.lexical["default"][:10], 1)], 60)

    def words_prf(self, a: Asked, top: int, terms: int) -> list[int]:
        return rows(lexical_prf(self.index, a, top, terms, 10, self.frequency))

    def hybrid_words_prf(self, a: Asked, top: int, terms: int) -> list[int]:
        return rrf([(a.dense[:10], 1),
                    (lexical_prf(self.index, a, top, terms, 10, self.frequency), 1)], 60)


def settings(index: Index, frequency: dict[str, int], query_tokens: dict[str, np.ndarray]
             ) -> dict[str, Setting]:
    m = Methods(index, frequency, query_tokens)
    return {**_baselines(m), **_fusions(m), **_late_interaction(m), **_feedback(m)}


def _baselines(m: Methods) -> dict[str, Setting]:
    return {
        "(a) baseline: vector over the raw chunk text": lambda a: rows(a.raw[:10]),
        "(b) default: hybrid RRF k60 10+10, title-prefixed": m.hybrid,
        "vector": lambda a: rows(a.dense[:10]),
        "lexical": m.lexical,
        "hybrid RRF over the raw-text vectors": lambda a: rrf(
            [(a.raw[:10], 1), (a.lexical["default"][:10], 1)], 60),
    }


def _fusions(m: Methods) -> dict[str, Setting]:
    found: dict[str, Setting] = {}
    for k in (5, 20, 60):
        for depth in (10, 20, 50):
            for wv, wl in ((1, 1), (1, 0.7), (0.7, 1)):
                found[f"RRF k{k} depth {depth} w {wv}:{wl}"] = \
                    partial(m.hybrid, depth=depth, k=k, wv=wv, wl=wl)
    for how in ("minmax", "z", "max"):
        for depth in (10, 20, 50):
            for alpha in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8):
                found[f"CombSUM {how} depth {depth} a {alpha}"] = \
                    partial(m.combined, depth=depth, alpha=alpha, how=how)
            found[f"CombMNZ {how} depth {depth} a 0.5"] = \
                partial(m.combined, depth=depth, alpha=0.5, how=how, mnz=True)
    for docs in ("max", "sum"):
        for depth in (10, 20, 50):
            found[f"RRF by document ({docs}) depth {depth}"] = \
                partial(m.rrf_docs, depth=depth, how=docs)
            for alpha in (0.5, 0.6, 0.7):
                found[f"CombSUM minmax by document ({docs}) depth {depth} a {alpha}"] = \
                    partial(m.combined, depth=depth, alpha=alpha, docs=docs)
    for field_name in FIELD_WEIGHTS:
        found[f"lexical BM25 {field_name}"] = partial(m.lexical, field=field_name)
        found[f"hybrid BM25 {field_name}"] = partial(m.hybrid, field=field_name)
    return found


def _late_interaction(m: Methods) -> dict[str, Setting]:
    found: dict[str, Setting] = {}
    for top in (10, 30):
        for blend in (None, 1.0):
            found[f"hybrid + MaxSim top {top} blend {blend}"] = \
                partial(m.hybrid_maxsim, top=top, blend=blend)
    found["vector + MaxSim top 10"] = m.vector_maxsim
    return found


def _feedback(m: Methods) -> dict[str, Setting]:
    found: dict[str, Setting] = {}
    for top in (3, 5):
        for beta in (0.3, 0.6, 1.0):
            found[f"vector PRF top {top} beta {beta}"] = \
                partial(m.vector_prf, top=top, beta=beta)
            found[f"hybrid, vector PRF top {top} beta {beta}"] = \
                partial(m.hybrid_vector_prf, top=top, beta=beta)
        for terms in (5, 10):
            found[f"lexical PRF top {top} terms {terms}"] = \
                partial(m.words_prf, top=top, terms=terms)
            found[f"hybrid, lexical PRF top {top} terms {terms}"] = \
                partial(m.hybrid_words_prf, top=top, terms=terms)
    return found


def frequencies(index: Index) -> dict[str, int]:
    counts: dict[str, int] = {}
    for chunk in index.chunks:
        for word in set(re.findall(r"[a-z][a-z0-9]+", chunk.text.lower())):
            counts[word] = counts.get(word, 0) + 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", default="stdlib,articles")
    parser.add_argument("--only", default="", help="settings whose name holds one of "
                        "these ('|' between), besides (a) and (b)")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/retrieval-lab"))
    parser.add_argument("--sets", default="", help="question sets (',' between; "
                        "default: all of each corpus)")
    parser.add_argument("-n", "--limit", type=int, default=0, help="questions per set")
    args = parser.parse_args()
    for name in args.corpora.split(","):
        corpus = CORPORA[name]()
        with tempfile.TemporaryDirectory() as folder:
            index = build(corpus, args.cache, Path(folder))
            for set_name, queries in corpus.sets.items():
                if args.sets and set_name not in args.sets.split(","):
                    continue
                queries = queries[:args.limit] if args.limit else queries
                report(index, corpus, set_name, queries, args.only)
                save(index, corpus, args.cache)


def report(index: Index, corpus: Corpus, set_name: str, queries: list[Query],
           only: str) -> None:
    asked = ask_all(index, queries, 50)
    query_tokens = {q.text: t for q, t in zip(
        queries, index.model.token_vectors([q.text for q in queries]), strict=True)}
    print(f"\n## {corpus.name} / {set_name}: {len(corpus.docs)} documents, "
          f"{len(index.chunks)} chunks, {len(queries)} questions\n")
    first = first_stage_ms(index, queries)
    print("First stage, ms per question: " + ", ".join(
        f"{k} {v:.1f}" for k, v in first.items()) + "; MaxSim with token states "
        "computed at query time (question + top N): " + ", ".join(
        f"N={n} {maxsim_on_the_fly_ms(index, asked, n):.0f}" for n in (10, 30)) + "\n")
    print("| setting | R@1 | R@5 | R@10 | MRR | ms/question beyond the first stage |\n"
          "|---|---|---|---|---|---|")
    warm = False
    for setting, rank in settings(index, frequencies(index), query_tokens).items():
        if only and not setting.startswith("(") \
                and not any(o in setting for o in only.split("|")):
            continue
        if "MaxSim" in setting and not warm:  # as if stored: computed outside the clock
            index.chunk_tokens(sorted({r for a in asked for r, _ in
                                       a.dense[:30] + a.lexical["default"][:30]}))
            warm = True
        started = time.perf_counter()
        ranks = [doc_rank(index, rank(a), a.query.expected) for a in asked]
        ms = (time.perf_counter() - started) * 1e3 / len(asked)
        s = scores_of(ranks)
        print(f"| {setting} | {s['R@1']:.3f} | {s['R@5']:.3f} | {s['R@10']:.3f} | "
              f"{s['MRR']:.3f} | {ms:.2f} |", flush=True)

if __name__ == "__main__":
    main()
