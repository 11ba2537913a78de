"""Points for the vector store tests: seeded random vectors of a small dimension,
and chunks made from them."""
import random

from trustgraph.schema import Term
from trustgraph.storage.vectors.store import ChunkVector

DIM = 8
I, L = Term.iri, Term.literal  # noqa: E741 (the wire's term kinds "i", "l")


def vec(seed: int | str) -> list[float]:
    rng = random.Random(str(seed))
    return [rng.uniform(-1, 1) for _ in range(DIM)]


def chunk(n: int, document: str = "doc", **changes) -> ChunkVector:
    values = dict(chunk_id=f"{document}#c{n}", document=document, vector=vec(f"c{n}"),
                  text=f"text {n}", title=f"title of {document}")
    return ChunkVector(**{**values, **changes})
