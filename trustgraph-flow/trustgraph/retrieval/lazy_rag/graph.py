"""Where the community cache reads a collection's entity graph from: the triples
store's ``graph-version`` and ``graph-edges`` services (``BusGraph``), or a store
object in this process (``StoreGraph``, for tools and tests). Both give the same
pages: entities are the IRIs joined by triples, minus extraction's chunk
and document nodes, which would join every entity of a passage to every other one
and are already represented by the ``co-occurs`` edges."""
from collections.abc import AsyncIterator, Mapping
from typing import Protocol

from trustgraph.base import Clients
from trustgraph.extract.vocabulary import CHUNK, DOCUMENT
from trustgraph.schema import (GraphEdgesRequest, GraphEdgesResponse, GraphVersionRequest,
                               GraphVersionResponse)
from trustgraph.storage.triples.store import TriplesStore

PAGE = 5000  # edges per page: each page's decoding is a short stop of the event loop


# One page of the entity graph: ((subject, object) → triples joining them, IRI → label).
Page = tuple[dict[tuple[str, str], int], dict[str, str]]


def entity_page(weights: Mapping[tuple[str, str], int], labels: Mapping[str, str]) -> Page:
    return ({pair: w for pair, w in weights.items() if _entity(pair[0]) and _entity(pair[1])},
            dict(labels))


def _entity(iri: str) -> bool:
    return not iri.startswith((CHUNK, DOCUMENT))


class GraphSource(Protocol):
    async def version(self, user: str, collection: str) -> int: ...

    def pages(self, user: str, collection: str) -> AsyncIterator[Page]:
        """The scope's entity graph, a page at a time (a pair may recur on a later
        page: its weights add up)."""


class BusGraph:
    """The triples store's services, through one flow's clients."""

    def __init__(self, clients: Clients) -> None:
        self._clients = clients

    async def version(self, user: str, collection: str) -> int:
        requester = await self._clients.get("graph-version")
        answer = await requester.call(GraphVersionRequest(user=user, collection=collection),
                                      GraphVersionResponse)
        return answer.version or 0

    async def pages(self, user: str, collection: str) -> AsyncIterator[Page]:
        requester = await self._clients.get("graph-edges")
        after: int | None = 0
        while after is not None:
            page = await requester.call(GraphEdgesRequest(
                user=user, collection=collection, after=after, limit=PAGE),
                GraphEdgesResponse)
            yield entity_page({(e.s, e.o): e.weight for e in page.edges or []},
                              page.labels or {})
            after = page.next


class StoreGraph:
    """A triples store object of this process."""

    def __init__(self, store: TriplesStore) -> None:
        self._store = store

    async def version(self, user: str, collection: str) -> int:
        return await self._store.version(user, collection)

    async def pages(self, user: str, collection: str) -> AsyncIterator[Page]:
        after: int | None = 0
        while after is not None:
            page = await self._store.edges(user, collection, after, PAGE)
            yield entity_page(page.weights, page.labels)
            after = page.next
