"""Vector search for retrieval: every search text embedded in one ``embeddings``
request, one store search per vector, all at once; the rankings merged."""
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

from trustgraph.base import Clients, HandledError
from trustgraph.schema import (DocumentEmbeddingsRequest, DocumentEmbeddingsResponse,
                               DocumentRagRequest, EmbeddingsRequest, EmbeddingsResponse,
                               GraphEmbeddingsRequest, GraphEmbeddingsResponse,
                               GraphRagRequest, Record, Response)

from .steps import concurrently, step

T = TypeVar("T")

# The vector stores searched, by service: what each is asked and answers. They take
# the same query: a vector, a limit, a user and collection.
STORES: dict[str, tuple[type[Record], type[Response]]] = {
    "document-embeddings": (DocumentEmbeddingsRequest, DocumentEmbeddingsResponse),
    "graph-embeddings": (GraphEmbeddingsRequest, GraphEmbeddingsResponse),
}


async def search_vectors(clients: Clients, texts: list[str], service: str,
                         scope: DocumentRagRequest | GraphRagRequest, limit: int,
                         error_type: str) -> list[Response]:
    """One ``service`` answer per text, in order: the ``limit`` nearest each text's
    vector in the user's collection (``scope.user``, ``scope.collection``)."""
    request_model, response_model = STORES[service]
    embeddings = await clients.get("embeddings")
    with step(error_type, "embedding the question"):
        vectors = (await embeddings.call(EmbeddingsRequest(texts=texts),
                                         EmbeddingsResponse)).vectors or []
    if len(vectors) != len(texts):
        raise HandledError(error_type, f"the embeddings service answered {len(vectors)} "
                                       f"vectors for {len(texts)} texts")
    store = await clients.get(service)
    with step(error_type, f"searching {service}"):
        return await concurrently(*(
            store.call(request_model(vector=vector, limit=limit, user=scope.user,
                                     collection=scope.collection), response_model)
            for vector in vectors))


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
