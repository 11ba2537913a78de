"""Where the community cache reads a collection's entity graph from: the triples
store's ``graph-version`` and ``graph-edges`` services (``BusGraph``), or a store
object in this process (``StoreGraph``, for tools and tests). Both give the same
``EntityGraph``: entities are the IRIs joined by triples, minus extraction's chunk
and document nodes, which would join every entity of a passage to every other one
and are already represented by the ``co-occurs`` edges."""
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from trustgraph.base import Clients
from trustgraph.extract.vocabulary import CHUNK, DOCUMENT
from trustgraph.schema import (GraphEdgesRequest, GraphEdgesResponse, GraphVersionRequest,
                               GraphVersionResponse)
from trustgraph.storage.triples.store import TriplesStore

PAGE = 5000  # edges per page: each page's decoding is a short stop of the event loop


@dataclass
class EntityGraph:
    version: int
    weights: Counter[tuple[str, str]] = field(default_factory=Counter)
    labels: dict[str, str] = field(default_factory=dict)

    def add(self, weights: Mapping[tuple[str, str], int], labels: Mapping[str, str]) -> None:
        for (s, o), weight in weights.items():
            if _entity(s) and _entity(o):
                self.weights[(s, o)] += weight
        self.labels.update(labels)


def _entity(iri: str) -> bool:
    return not iri.startswith((CHUNK, DOCUMENT))


class GraphSource(Protocol):
    async def version(self, user: str, collection: str) -> int: ...

    async def read(self, user: str, collection: str, version: int) -> EntityGraph: ...


class BusGraph:
    """The triples store's services, through one flow's clients."""

    def __init__(self, clients: Clients) -> None:
        self._clients = clients

    async def version(self, user: str, collection: str) -> int:
        requester = await self._clients.get("graph-version")
        answer = await requester.call(GraphVersionRequest(user=user, collection=collection),
                                      GraphVersionResponse)
        return answer.version or 0

    async def read(self, user: str, collection: str, version: int) -> EntityGraph:
        requester = await self._clients.get("graph-edges")
        graph, after = EntityGraph(version), 0
        while after is not None:
            page = await requester.call(GraphEdgesRequest(
                user=user, collection=collection, after=after, limit=PAGE),
                GraphEdgesResponse)
            graph.add({(e.s, e.o): e.weight for e in page.edges or []}, page.labels or {})
            after = page.next
        return graph


class StoreGraph:
    """A triples store object of this process."""

    def __init__(self, store: TriplesStore) -> None:
        self._store = store

    async def version(self, user: str, collection: str) -> int:
        return await self._store.version(user, collection)

    async def read(self, user: str, collection: str, version: int) -> EntityGraph:
        graph, after = EntityGraph(version), 0
        while after is not None:
            page = await self._store.edges(user, collection, after, PAGE)
            graph.add(page.weights, page.labels)
            after = page.next
        return graph
