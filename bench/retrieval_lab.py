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
import asyncio
import math
import pickle
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from trustgraph.chunking import DEFAULT_MAX_TOKENS, DEFAULT_OVERLAP, MODEL_LIMIT, chunk_document
from trustgraph.chunking.context import embedded_text
from trustgraph.decoding import decode
from trustgraph.ingest.decoder import token_counter
from trustgraph.storage.vectors.lexical import STOPWORDS, Fts5Index, LexicalChunk

if TYPE_CHECKING:
    from trustgraph.embeddings.minilm.provider import MiniLm

USER, COLLECTION = "lab", "lab"
DEPTH = 10


@dataclass(frozen=True)
class Doc:
    id: str
    title: str
    text: str


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    expected: str  # the document id


@dataclass
class Chunk:
    id: str
    document: str
    title: str
    text: str
    embedded: str


@dataclass
class Corpus:
    name: str
    docs: list[Doc]
    sets: dict[str, list[Query]]


def stdlib_corpus() -> Corpus:
    from bench.retrieval import corpus
    items = corpus(0)
    return Corpus("stdlib", [Doc(i.id, i.id, i.text) for i in items],
                  {"summary": [Query(i.id, i.question, i.id) for i in items]})


def articles_corpus(count: int = 2000) -> Corpus:
    from bench.articles import articles
    items = articles(count)
    return Corpus("articles", [Doc(a.id, a.title, a.text) for a in items], {
        "sentence": [Query(a.id, a.question, a.id) for a in items],
        "description": [Query(a.id, a.description, a.id) for a in items if a.description]})


CORPORA: dict[str, Callable[[], Corpus]] = {"stdlib": stdlib_corpus,
                                            "articles": articles_corpus}


def chunks_of(docs: list[Doc]) -> list[Chunk]:
    counter = token_counter("minilm")
    chunks = []
    for doc in docs:
        decoded = decode(doc.text.encode(), "text/plain")
        for c in chunk_document(decoded, counter, DEFAULT_MAX_TOKENS, DEFAULT_OVERLAP,
                                doc.title, MODEL_LIMIT):
            chunks.append(Chunk(f"{doc.id}/c{c.index}", doc.id, doc.title, c.text,
                                embedded_text(c.text, list(c.headings), doc.title)))
    return chunks


@dataclass
class Index:
    """One corpus's chunks, their vectors, an FTS5 index, and token states on demand."""

    chunks: list[Chunk]
    vectors: np.ndarray  # of the title-prefixed text, as the chunk stage embeds it
    raw_vectors: np.ndarray  # of the chunk's own text: the "MiniLM vector-only"
    folder: Path
    model: "MiniLm"
    tokens: dict[int, np.ndarray] = field(default_factory=dict)
    lexical: dict[str, Fts5Index] = field(default_factory=dict)

    def chunk_tokens(self, rows: Sequence[int]) -> list[np.ndarray]:
        missing = [r for r in rows if r not in self.tokens]
        if missing:
            found = self.model.token_vectors([self.chunks[r].embedded for r in missing])
            for row, states in zip(missing, found, strict=True):
                self.tokens[row] = states.astype(np.float16)
        return [self.tokens[r].astype(np.float32) for r in rows]

    def fts(self, weights: dict[str, float] | None = None) -> Fts5Index:
        """An index with these BM25 column weights (one SQLite file per setting)."""
        key = repr(sorted((weights or {}).items()))
        if key not in self.lexical:
            path = self.folder / f"lexical-{len(self.lexical)}.sqlite"
            index = Fts5Index(path, weights)
            asyncio.run(index.upsert(USER, COLLECTION, [
                LexicalChunk(c.id, c.document, c.text, c.title) for c in self.chunks]))
            self.lexical[key] = index
        return self.lexical[key]


def build(corpus: Corpus, cache: Path, folder: Path) -> Index:
    from trustgraph.embeddings.minilm.provider import MiniLm
    model = MiniLm()
    chunks = chunks_of(corpus.docs)
    path = cache / f"{corpus.name}-{len(chunks)}-v2.pickle"
    if path.exists():
        vectors, raw, tokens = pickle.loads(path.read_bytes())
    else:
        started = time.perf_counter()
        vectors = model.embed([c.embedded for c in chunks])
        raw, tokens = model.embed([c.text for c in chunks]), {}
        print(f"{corpus.name}: {len(chunks)} chunks embedded twice in "
              f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
    return Index(chunks, vectors, raw, folder, model, tokens)


def save(index: Index, corpus: Corpus, cache: Path) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"{corpus.name}-{len(index.chunks)}-v2.pickle"
    path.write_bytes(pickle.dumps((index.vectors, index.raw_vectors, index.tokens)))


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


def settings(index: Index, frequency: dict[str, int], query_tokens: dict[str, np.ndarray]
             ) -> dict[str, Callable[[Asked], list[int]]]:
    def rows(ranking: Ranked) -> list[int]:
        return [r for r, _ in ranking]

    def hybrid(a: Asked, depth: int = 10, k: float = 60, wv: float = 1, wl: float = 1,
               field: str = "default") -> list[int]:
        return rrf([(a.dense[:depth], wv), (a.lexical[field][:depth], wl)], k)

    def combined(a: Asked, depth: int, alpha: float, how: str = "minmax",
                 mnz: bool = False, docs: str | None = None) -> list[int]:
        scores = comb([(a.dense[:depth], alpha), (a.lexical["default"][:depth], 1 - alpha)],
                      how, mnz)
        return by_document(index, scores, docs) if docs else order(scores)

    def rrf_docs(a: Asked, depth: int, how: str) -> list[int]:
        fused: dict[int, float] = {}
        for ranking in (a.dense[:depth], a.lexical["default"][:depth]):
            for rank, (row, _) in enumerate(ranking, 1):
                fused[row] = fused.get(row, 0.0) + 1 / (60 + rank)
        return by_document(index, fused, how)

    def tokens(a: Asked) -> np.ndarray:
        if a.query.text not in query_tokens:
            query_tokens[a.query.text] = index.model.token_vectors([a.query.text])[0]
        return query_tokens[a.query.text]

    def lexical(a: Asked, field: str = "default") -> list[int]:
        return rows(a.lexical[field][:10])

    def hybrid_maxsim(a: Asked, top: int, blend: float | None) -> list[int]:
        return maxsim_rerank(index, tokens(a), hybrid(a, depth=top), top, blend)

    def vector_prf(a: Asked, top: int, beta: float) -> list[int]:
        return rows(dense_prf(index, a, top, beta, 10))

    def hybrid_vector_prf(a: Asked, top: int, beta: float) -> list[int]:
        return rrf([(dense_prf(index, a, top, beta, 10), 1),
                    (a.lexical["default"][:10], 1)], 60)

    def words_prf(a: Asked, top: int, terms: int) -> list[int]:
        return rows(lexical_prf(index, a, top, terms, 10, frequency))

    def hybrid_words_prf(a: Asked, top: int, terms: int) -> list[int]:
        return rrf([(a.dense[:10], 1),
                    (lexical_prf(index, a, top, terms, 10, frequency), 1)], 60)

    found: dict[str, Callable[[Asked], list[int]]] = {
        "(a) baseline: vector over the raw chunk text": lambda a: rows(a.raw[:10]),
        "(b) default: hybrid RRF k60 10+10, title-prefixed": hybrid,
        "vector": lambda a: rows(a.dense[:10]),
        "lexical": lexical,
        "hybrid RRF over the raw-text vectors": lambda a: rrf(
            [(a.raw[:10], 1), (a.lexical["default"][:10], 1)], 60),
    }
    for k in (5, 20, 60):
        for depth in (10, 20, 50):
            for wv, wl in ((1, 1), (1, 0.7), (0.7, 1)):
                found[f"RRF k{k} depth {depth} w {wv}:{wl}"] = \
                    partial(hybrid, depth=depth, k=k, wv=wv, wl=wl)
    for how in ("minmax", "z", "max"):
        for depth in (10, 20, 50):
            for alpha in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8):
                found[f"CombSUM {how} depth {depth} a {alpha}"] = \
                    partial(combined, depth=depth, alpha=alpha, how=how)
            found[f"CombMNZ {how} depth {depth} a 0.5"] = \
                partial(combined, depth=depth, alpha=0.5, how=how, mnz=True)
    for docs in ("max", "sum"):
        for depth in (10, 20, 50):
            found[f"RRF by document ({docs}) depth {depth}"] = \
                partial(rrf_docs, depth=depth, how=docs)
            for alpha in (0.5, 0.6, 0.7):
                found[f"CombSUM minmax by document ({docs}) depth {depth} a {alpha}"] = \
                    partial(combined, depth=depth, alpha=alpha, docs=docs)
    for field_name in FIELD_WEIGHTS:
        found[f"lexical BM25 {field_name}"] = partial(lexical, field=field_name)
        found[f"hybrid BM25 {field_name}"] = partial(hybrid, field=field_name)
    for top in (10, 30):
        for blend in (None, 1.0):
            found[f"hybrid + MaxSim top {top} blend {blend}"] = \
                partial(hybrid_maxsim, top=top, blend=blend)
    found["vector + MaxSim top 10"] = \
        lambda a: maxsim_rerank(index, tokens(a), rows(a.dense[:10]), 10, None)
    for top in (3, 5):
        for beta in (0.3, 0.6, 1.0):
            found[f"vector PRF top {top} beta {beta}"] = \
                partial(vector_prf, top=top, beta=beta)
            found[f"hybrid, vector PRF top {top} beta {beta}"] = \
                partial(hybrid_vector_prf, top=top, beta=beta)
        for terms in (5, 10):
            found[f"lexical PRF top {top} terms {terms}"] = \
                partial(words_prf, top=top, terms=terms)
            found[f"hybrid, lexical PRF top {top} terms {terms}"] = \
                partial(hybrid_words_prf, top=top, terms=terms)
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
