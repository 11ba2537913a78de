"""Search for retrieval, shared by every RAG service.

* ``embed``: every search text embedded in one ``embeddings`` request, once per
  question however many stores are searched with the vectors;
* ``search_vectors``: one store search per vector, all at once; ``merge_rankings``
  interleaves the answers.
* ``search_chunks``: chunks by vector, by words (``lexical-search``, BM25) or both
  (hybrid), the rankings of every search text and retriever fused by reciprocal rank
  (fusion.py); each chunk keeps what each retriever scored it.
"""
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, overload

from pydantic import BaseModel, Field

from trustgraph.base import Clients, HandledError, ProcessorSettings
from trustgraph.base.steps import concurrently, step
from trustgraph.schema import (
    DocumentEmbeddingsRequest,
    DocumentEmbeddingsResponse,
    EmbeddingsRequest,
    EmbeddingsResponse,
    GraphEmbeddingsRequest,
    GraphEmbeddingsResponse,
    LexicalSearchRequest,
    Record,
    Response,
    ScoredChunk,
)

from .fusion import Fused, Ranking, fuse

T = TypeVar("T")

# The vector stores searched, by service: what each is asked and answers. They take
# the same query: a vector, a limit, a user and collection.
STORES: dict[str, tuple[type[Record], type[Response]]] = {
    "document-embeddings": (DocumentEmbeddingsRequest, DocumentEmbeddingsResponse),
    "graph-embeddings": (GraphEmbeddingsRequest, GraphEmbeddingsResponse),
}


class Scope(Protocol):
    """Whose vectors and chunks: any request with a user and a collection (a RAG request)."""

    user: str
    collection: str


class Embedded(list):
    """Vectors, one per text, that also say which model made them (``model``; None
    from an embeddings service that does not say), so that a vector store searched
    with them can refuse a collection embedded by another model. A plain list
    otherwise: callers that only read the vectors need not know."""

    model: str | None = None


async def embed(clients: Clients, texts: list[str], error_type: str) -> Embedded:
    """Every search text's vector, from one ``embeddings`` request."""
    embeddings = await clients.get("embeddings")
    with step(error_type, "embedding the question"):
        response = await embeddings.call(EmbeddingsRequest(texts=texts), EmbeddingsResponse)
    vectors = Embedded(response.vectors or [])
    vectors.model = response.model
    if len(vectors) != len(texts):
        raise HandledError(error_type, f"the embeddings service answered {len(vectors)} "
                                       f"vectors for {len(texts)} texts")
    return vectors


@overload
async def search_vectors(clients: Clients, vectors: list[list[float]],
                         service: Literal["graph-embeddings"], scope: Scope, limit: int,
                         error_type: str) -> list[GraphEmbeddingsResponse]: ...
@overload
async def search_vectors(clients: Clients, vectors: list[list[float]],
                         service: Literal["document-embeddings"], scope: Scope, limit: int,
                         error_type: str) -> list[DocumentEmbeddingsResponse]: ...
async def search_vectors(clients: Clients, vectors: list[list[float]], service: str,
                         scope: Scope, limit: int, error_type: str) -> list[Any]:
    """One ``service`` answer per vector, in order: the ``limit`` nearest it in the
    user's collection (``scope.user``, ``scope.collection``). Vectors from ``embed``
    name their model, and the store refuses a collection of another model's."""
    request_model, response_model = STORES[service]
    store = await clients.get(service)
    model = getattr(vectors, "model", None)
    with step(error_type, f"searching {service}"):
        return list(await concurrently(*(
            store.call(request_model(vector=vector, limit=limit, user=scope.user,
                                     collection=scope.collection, model=model),
                       response_model)
            for vector in vectors)))


def merge_rankings(rankings: Sequence[Sequence[T]], key: Callable[[T], Hashable],
                   score: Callable[[T], float], limit: int) -> list[T]:
    """At most ``limit`` items, each once: every ranking's first, then every
    ranking's second, and so on, so each search (the question and each sub-question)
    contributes its best rather than the one with the highest scores taking all. An
    item found by several searches is kept with its best score."""
    best: dict[Hashable, T] = {}
    for rank in range(max((len(r) for r in rankings), default=0)):
        for ranking in rankings:
            if rank < len(ranking):
                item = ranking[rank]
                kept = best.setdefault(key(item), item)
                if score(item) > score(kept):
                    best[key(item)] = item
    return list(best.values())[:limit]


# -- chunks: vector, lexical or hybrid ---------------------------------------------

RetrievalMode = Literal["vector", "lexical", "hybrid"]


class RetrievalSettings(ProcessorSettings):
    """How the RAG services find chunks; each an environment variable and a flag."""

    # Hybrid finds the right document more often than either alone (bench.retrieval)
    # and costs little more time to metadata (bench.rag; docs/retrieval.md).
    tg_retrieval: RetrievalMode = Field("hybrid", description=(
        "how chunks are found unless a request says: nearest vectors, BM25 word "
        "matches, or both fused by reciprocal rank (hybrid, the default)"))
    tg_rrf_k: float = Field(60.0, gt=0, description=(
        "reciprocal-rank fusion's k: higher flattens the difference between ranks"))
    tg_rrf_vector_weight: float = Field(1.0, ge=0, description="weight of vector ranks")
    tg_rrf_lexical_weight: float = Field(1.0, ge=0, description="weight of BM25 ranks")
    # Measured (bench.retrieval): deeper lists made hybrid worse, as chunks that are
    # middling for both retrievers outscore one retriever's best.
    tg_retrieval_depth: int = Field(10, ge=1, le=1000, description=(
        "candidates each retriever returns per search text before fusion (at least "
        "the request's limit)"))


@dataclass(frozen=True)
class Fusion:
    """The fusion part of ``RetrievalSettings``, as ``search_chunks`` takes it."""

    mode: RetrievalMode = "hybrid"
    k: float = 60.0
    weights: dict[str, float] = field(
        default_factory=lambda: {"vector": 1.0, "lexical": 1.0})
    depth: int = 10

    @classmethod
    def of(cls, settings: BaseModel | None) -> "Fusion":
        """From a processor's settings. A processor built with plain
        ``ProcessorSettings`` (no retrieval settings) keeps vector search, as before
        lexical search existed; ``RetrievalSettings`` (what ``tg-run``/``tg-start``
        load) default to hybrid (``TG_RETRIEVAL``)."""
        if not isinstance(settings, RetrievalSettings):
            return cls(mode="vector")
        return cls(settings.tg_retrieval, settings.tg_rrf_k,
                   {"vector": settings.tg_rrf_vector_weight,
                    "lexical": settings.tg_rrf_lexical_weight}, settings.tg_retrieval_depth)


@dataclass
class FoundChunk:
    """A chunk found, with each retriever's score ("vector": cosine similarity,
    "lexical": BM25) and the fused score ("fused", when fused)."""

    chunk: ScoredChunk
    scores: dict[str, float]


async def search_chunks(clients: Clients, texts: list[str], scope: Scope, limit: int,
                        error_type: str, fusion: Fusion = Fusion(),
                        mode: RetrievalMode | None = None,
                        vectors: list[list[float]] | None = None) -> list[FoundChunk]:
    """At most ``limit`` chunks of ``scope``'s collection for the search ``texts``
    (the question, its rewrite, sub-questions), best first. ``mode`` (default
    ``fusion.mode``): "vector" keeps the vector order (each text contributing its
    nearest in turn), "lexical" and "hybrid" fuse every ranking by reciprocal rank.
    ``vectors``: the texts' vectors, when the caller has embedded them already."""
    mode = mode or fusion.mode
    depth = max(limit, fusion.depth) if mode == "hybrid" else limit
    vector, lexical = await concurrently(
        _vector_rankings(clients, texts, vectors, scope, depth, error_type, mode),
        _lexical_rankings(clients, texts, scope, depth, error_type, mode))
    if mode == "vector":
        merged = merge_rankings([r.items for r in vector], key=_chunk_id,
                                score=_score, limit=limit)
        return [FoundChunk(c, {"vector": c.score}) for c in merged]
    # Fused per search text, then interleaved as in vector mode: each sub-question
    # is its own need, and contributes its best rather than losing to the chunks
    # that are middling for all of them.
    per_text = [fuse([r for r in (*vector, *lexical) if r.text == n], key=_chunk_id,
                     score=_score, k=fusion.k, weights=fusion.weights)
                for n in range(len(texts))]
    merged = merge_rankings(per_text, key=lambda entry: entry.item.chunk_id,
                            score=lambda entry: entry.fused, limit=limit)
    return [_found(entry) for entry in merged]


async def _vector_rankings(clients: Clients, texts: list[str],
                           vectors: list[list[float]] | None, scope: Scope, limit: int,
                           error_type: str, mode: RetrievalMode) -> list[Ranking]:
    if mode == "lexical":
        return []
    if vectors is None:
        vectors = await embed(clients, texts, error_type)
    found = await search_vectors(clients, vectors, "document-embeddings", scope, limit,
                                 error_type)
    return [Ranking("vector", answer.chunks or [], n) for n, answer in enumerate(found)]


async def _lexical_rankings(clients: Clients, texts: list[str], scope: Scope, limit: int,
                            error_type: str, mode: RetrievalMode) -> list[Ranking]:
    if mode == "vector":
        return []
    index = await clients.get("lexical-search")
    with step(error_type, "searching lexical-search"):
        found = await concurrently(*(
            index.call(LexicalSearchRequest(query=text, limit=limit, user=scope.user,
                                            collection=scope.collection),
                       DocumentEmbeddingsResponse)
            for text in texts))
    return [Ranking("lexical", answer.chunks or [], n) for n, answer in enumerate(found)]


def _chunk_id(chunk: ScoredChunk) -> str:
    return chunk.chunk_id


def _score(chunk: ScoredChunk) -> float:
    return chunk.score


def _found(entry: Fused[ScoredChunk]) -> FoundChunk:
    return FoundChunk(entry.item, {**entry.scores, "fused": round(entry.fused, 6)})
