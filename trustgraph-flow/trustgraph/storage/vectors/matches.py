"""A chunk a search found: what the vector and the lexical searches both answer with."""
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ChunkMatch:
    chunk_id: str
    document: str
    title: str
    text: str
    score: float  # cosine similarity for a vector search; BM25 (higher is better) for a lexical one
    meta: dict[str, Any] = field(default_factory=dict)
