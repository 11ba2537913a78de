"""Where the community cache reads a collection's entity graph from: the triples
store's ``graph-version`` and ``graph-edges`` services.

The pages come as the store encoded them (``GraphEdgesResponse`` JSON, all of them
streamed for one request) and are handed on undecoded: decoding a 5,000-edge page
took ~40 ms and filtering it ~25 ms, stalls that the event loop answering other
questions in this process cannot afford; the child process computing the
communities decodes them (``pages.py``)."""
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Protocol

from trustgraph.base import Clients
from trustgraph.extract.vocabulary import CHUNK, DOCUMENT
from trustgraph.schema import GraphEdgesRequest, GraphVersionRequest, GraphVersionResponse

PAGE = 5000  # edges per page: the child decodes one while the store reads the next
# Not entities: extraction's chunk and document nodes, which would join every entity
# of a passage to every other one and are already represented by ``co-occurs`` edges.
NOT_ENTITIES = (CHUNK, DOCUMENT)


class GraphSource(Protocol):
    async def version(self, user: str, collection: str) -> int: ...

    def pages(self, user: str, collection: str) -> AsyncIterator[bytes]:
        """The scope's entity graph, a ``GraphEdgesResponse`` JSON page at a time (a
        pair may recur on a later page: its weights add up)."""


class BusGraph:
    """The triples store's services, through one flow's clients."""

    def __init__(self, clients: Clients) -> None:
        self._clients = clients

    async def version(self, user: str, collection: str) -> int:
        requester = await self._clients.get("graph-version")
        answer = await requester.call(GraphVersionRequest(user=user, collection=collection),
                                      GraphVersionResponse)
        return answer.version or 0

    async def pages(self, user: str, collection: str) -> AsyncIterator[bytes]:
        requester = await self._clients.get("graph-edges")
        request = GraphEdgesRequest(user=user, collection=collection, limit=PAGE,
                                    streaming=True)
        async with aclosing(requester.frames(request)) as batches:
            async for batch in batches:
                for data, _ in batch:
                    yield data
