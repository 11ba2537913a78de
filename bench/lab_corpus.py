"""bench.retrieval_lab's corpora and the index it builds over them in one process:
the decoder's chunks, their MiniLM vectors (cached) and an FTS5 index beside them."""
import asyncio
import pickle
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from trustgraph.chunking import DEFAULT_MAX_TOKENS, DEFAULT_OVERLAP, MODEL_LIMIT, chunk_document
from trustgraph.chunking.context import embedded_text
from trustgraph.decoding import decode
from trustgraph.ingest.decoder import token_counter
from trustgraph.storage.vectors.lexical import Fts5Index, LexicalChunk

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
