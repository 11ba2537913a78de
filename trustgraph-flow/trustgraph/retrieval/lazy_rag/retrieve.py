"""Everything LazyRAG does before the LLM: the subgraph, its communities, and the
result records with confidence and missing information. ``expand`` answers with
this alone; a query then writes the summary from it.

In two steps, so that a streaming answer's sources go out as soon as the subgraph is
known: ``find`` gives the subgraph and its relationships (the sources) while the
communities are still being looked up; ``Retrieval.result`` adds them, confidence and
missing information."""
import asyncio
import logging
from collections.abc import Awaitable

from trustgraph.base import Clients, RequestTimeout, ServiceError
from trustgraph.schema import LazyRagExpandRequest, Source

from .cache import CommunityCache
from .communities import Communities
from .context import Relations, Result, build, relations_of
from .graph import BusGraph, GraphSource
from .settings import Limits
from .subgraph import Subgraph, find_subgraph

log = logging.getLogger(__name__)


class Retrieval:
    """A subgraph found, and its communities, looked up meanwhile (None: none wanted
    or none to be had)."""

    def __init__(self, query: str, subgraph: Subgraph,
                 communities: asyncio.Task | None = None,
                 version: asyncio.Task | None = None) -> None:
        self._query = query
        self._subgraph = subgraph
        self._communities = communities
        self._version = version  # the communities' input, dropped with them
        self.relations: Relations = relations_of(subgraph)

    @property
    def sources(self) -> list[Source]:
        return self.relations.sources

    async def result(self) -> Result:
        found = await self._communities if self._communities is not None else None
        result = build(self._query, self._subgraph, self.relations,
                       found[0] if found else None)
        if found:
            result.cache = "hit" if found[1] else "miss"
        return result

    def drop(self) -> None:
        """Stop looking up the communities (the request is over without them)."""
        for task in (self._communities, self._version):
            if task is not None:
                _drop(task)


async def find(request: LazyRagExpandRequest, limits: Limits, cache: CommunityCache,
               clients: Clients, graph: GraphSource | None = None) -> Retrieval:
    """``graph``: where communities read the entity graph (the triples store's
    services on ``clients`` unless given)."""
    graph = graph or BusGraph(clients)
    if not limits.use_communities:
        return Retrieval(request.query, await find_subgraph(
            request, limits.max_entities, limits.max_hops, clients))
    # The graph version is read while the subgraph is found: one round trip less
    # before the sources go out.
    version = asyncio.create_task(graph.version(request.user, request.collection))
    try:
        subgraph = await find_subgraph(request, limits.max_entities, limits.max_hops,
                                       clients)
    except BaseException:
        _drop(version)
        raise
    if not subgraph.entities:  # nothing to group: no communities wanted
        _drop(version)
        return Retrieval(request.query, subgraph)
    communities = asyncio.create_task(_communities(request, cache, graph, version))
    return Retrieval(request.query, subgraph, communities, version)


async def retrieve(request: LazyRagExpandRequest, limits: Limits, cache: CommunityCache,
                   clients: Clients, graph: GraphSource | None = None) -> Result:
    retrieval = await find(request, limits, cache, clients, graph)
    try:
        return await retrieval.result()
    finally:
        retrieval.drop()


def _drop(task: asyncio.Task) -> None:
    """Cancel ``task``, or take its failure if it already failed (not left for the
    garbage collector to log)."""
    task.cancel()
    if task.done() and not task.cancelled():
        task.exception()


async def _communities(request: LazyRagExpandRequest, cache: CommunityCache,
                       graph: GraphSource, version: Awaitable[int]
                       ) -> tuple[Communities, bool] | None:
    """The collection's communities, or None when they cannot be had: community
    context enriches an answer, so its failure leaves the answer without it."""
    try:
        return await cache.get((request.user, request.collection), graph, await version)
    except (ServiceError, RequestTimeout, RuntimeError) as failure:
        log.warning("communities of %s/%s unavailable, answering without them: %s",
                    request.user, request.collection, failure)
        return None
