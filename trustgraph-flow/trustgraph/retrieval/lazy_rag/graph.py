"""Where the community cache reads a collection's entity graph from: the triples
store's ``graph-version`` and ``graph-edges`` services.

The pages come as the store encoded them (``GraphEdgesResponse`` JSON) and are handed
on undecoded: decoding a 5,000-edge page took ~40 ms and filtering it ~25 ms, stalls
that the event loop answering other questions in this process cannot afford; the
child process computing the communities decodes them (``pages.py``).

Each page is asked for on its own, the next one while the one before goes to the
child: at 1M triples, the 160 pages of one streamed request (~50 MB in a burst on a
non-persistent topic) lost a page in transit, so the computation failed every time
(``bench.scale``). A page's cursor is read off the end of its bytes, where the
store writes it.
"""
import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Protocol

from trustgraph.base import Clients
from trustgraph.extract.vocabulary import CHUNK, DOCUMENT
from trustgraph.schema import GraphEdgesRequest, GraphVersionRequest, GraphVersionResponse

PAGE = 5000  # edges per page: the child decodes one while the store reads the next
NEXT = re.compile(rb',"next":(\d+),"version":\d+\}\s*$')  # GraphEdgesResponse.page
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

        async def page(after: int) -> bytes:
            request = GraphEdgesRequest(user=user, collection=collection, after=after,
                                        limit=PAGE)
            async with aclosing(requester.frames(request)) as batches:
                # Its records' JSON: a service that streams no text sends no ``Delta``.
                return b"".join([data async for batch in batches for data, _ in batch
                                 if isinstance(data, bytes)])

        coming: asyncio.Future[bytes] | None = asyncio.ensure_future(page(0))
        try:
            while coming is not None:
                data = await coming
                after = NEXT.search(data[-64:])  # absent on the last page or an error
                coming = asyncio.ensure_future(page(int(after[1]))) if after else None
                yield data
        finally:
            if coming is not None:
                coming.cancel()
                await asyncio.gather(coming, return_exceptions=True)
