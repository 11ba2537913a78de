"""A synthetic knowledge core of any size, written straight to a file (the format of
docs/knowledge-cores.md), so ``bench.scale`` builds a big collection by importing it
rather than by hours of embedding.

What it holds, for ``chunks`` chunks and ``triples`` triples:

* a document per 10 chunks, with its metadata;
* chunks of ~80 words drawn from a vocabulary of 4,000 made-up words at Zipf's
  frequencies (a few words in most chunks, most words in few, as in real text, which
  is what the lexical index's cost depends on), each with citation fields; their
  vectors are random unit vectors scattered around 256 random
  centres (so the vectors have the clumps real ones have, which is what an HNSW index
  and a full scan both see). The questions the benchmark asks are embedded by the
  real model, so they land nowhere in particular among them: search costs what it
  costs with real vectors, though what it finds means nothing;
* ``triples // 5`` entities named as extraction names them (``entity 17`` is
  ``urn:tg:entity:entity-17``, labelled ``entity 17``), each with a vector (as above)
  and the documents that mention it;
* a label triple per entity, and random edges between entities over 20 predicates up
  to ``triples`` in all, each found in one chunk of one document (provenance).
"""
import json
import random
import time
from pathlib import Path

import numpy as np

from trustgraph.extract.vocabulary import entity_iri
from trustgraph.schema import RDFS_LABEL
from trustgraph.schema.core_archive import CoreWriter, manifest, member_name

DIMENSION = 384
CHUNKS_PER_DOCUMENT = 10
CENTRES = 256
MODEL = "all-MiniLM-L6-v2"  # what the stack's embeddings are: the core must match
SYLLABLES = ("ka lo mi ne ru sa ti vo zu pe ra do fi gu ha je ko li ma nu "
             "po qui re se ta ul ve wa xi yo").split()
VOCABULARY = [a + b + c for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES[:5]][:4000]
ZIPF = [1 / rank for rank in range(1, len(VOCABULARY) + 1)]
PAGE = {"documents": 1000, "chunks": 500, "entities": 1000, "triples": 5000}


def chunk_of(index: int) -> tuple[str, str]:
    """(document id, chunk id) of chunk ``index``."""
    document = f"doc-{index // CHUNKS_PER_DOCUMENT}"
    return document, f"{document}/c{index % CHUNKS_PER_DOCUMENT}"


def _dumps(row: dict) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"))


class Clumped:
    """Unit vectors around fixed random centres."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.centres = rng.standard_normal((CENTRES, DIMENSION)).astype(np.float32)

    def take(self, count: int) -> bytes:
        vectors = self.centres[self.rng.integers(0, CENTRES, count)] + \
            0.6 * self.rng.standard_normal((count, DIMENSION)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors.astype("<f4").tobytes()


def _pages(rows, size: int):
    page = []
    for row in rows:
        page.append(_dumps(row) + "\n")
        if len(page) == size:
            yield page
            page = []
    if page:
        yield page


def _documents(chunks: int):
    for d in range((chunks + CHUNKS_PER_DOCUMENT - 1) // CHUNKS_PER_DOCUMENT):
        yield {"id": f"doc-{d}", "title": f"Document {d}", "kind": "text/plain",
               "size": 6000, "sha256": f"{d:064x}", "time": 1_700_000_000, "version": 1}


def question_words(rng: random.Random, count: int = 3) -> list[str]:
    """Words as a question has them: neither the commonest nor the rarest."""
    return rng.sample(VOCABULARY[30:600], count)


def _chunks(chunks: int, rng: random.Random):
    for i in range(chunks):
        document, chunk = chunk_of(i)
        order = i % CHUNKS_PER_DOCUMENT
        yield {"chunk_id": chunk, "document": document, "title": f"Document {document[4:]}",
               "text": f"Passage {i}. " + " ".join(rng.choices(VOCABULARY, ZIPF, k=80)) + ".",
               "version": 1, "index": order,
               "meta": {"order": order, "char_range": [order * 600, order * 600 + 599]}}


def _entities(count: int, chunks: int):
    for n in range(count):
        documents = [chunk_of(n % chunks)[0], chunk_of((n * 7 + 3) % chunks)[0]]
        yield {"entity": {"t": "i", "i": entity_iri(f"entity {n}")}, "label": f"entity {n}",
               "documents": list(dict.fromkeys(documents))}


def _triples(triples: int, entities: int, chunks: int, rng: random.Random):
    iris = [entity_iri(f"entity {n}") for n in range(entities)]
    predicates = [f"urn:tg:rel:p{n}" for n in range(20)]
    for n in range(triples):
        document, chunk = chunk_of(n % chunks)
        if n < entities:
            yield {"s": iris[n], "p": RDFS_LABEL, "o": f"entity {n}", "o_iri": False,
                   "document": document, "chunk": chunk}
        else:
            yield {"s": rng.choice(iris), "p": rng.choice(predicates),
                   "o": rng.choice(iris), "o_iri": True, "document": document, "chunk": chunk}


def synthesize(path: Path, chunks: int, triples: int, seed: int = 7) -> dict:
    """Write the core to ``path``; returns its manifest's counts and the seconds taken."""
    started = time.perf_counter()
    rng, vectors = random.Random(seed), Clumped(np.random.default_rng(seed))
    entities = max(1, triples // 5)
    parts = {"documents": _documents(chunks), "chunks": _chunks(chunks, rng),
             "entities": _entities(entities, chunks),
             "triples": _triples(triples, entities, chunks, rng)}
    counts = {"documents": (chunks + CHUNKS_PER_DOCUMENT - 1) // CHUNKS_PER_DOCUMENT,
              "chunks": chunks, "entities": entities, "triples": triples}
    writer = CoreWriter()
    with open(path, "wb") as file:
        file.write(writer.member("manifest.json", json.dumps(manifest(
            "bench", "synthetic", MODEL, DIMENSION, counts)).encode()))
        for part, rows in parts.items():
            for number, page in enumerate(_pages(rows, PAGE[part]), 1):
                file.write(writer.member(member_name(part, number), "".join(page).encode()))
                if part in ("chunks", "entities"):
                    file.write(writer.member(member_name(part, number, vectors=True),
                                             vectors.take(len(page))))
        file.write(writer.end())
    return {"counts": counts, "seconds": time.perf_counter() - started,
            "bytes": path.stat().st_size}
