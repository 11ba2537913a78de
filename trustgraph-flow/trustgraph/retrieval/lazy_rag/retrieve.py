"""Everything LazyRAG does before the LLM: the subgraph, its communities, and the
result records with confidence and missing information. ``expand`` answers with
this alone; a query then writes the summary from it."""
import asyncio
import logging

from trustgraph.base import Clients, RequestTimeout, ServiceError
from trustgraph.schema import LazyRagExpandRequest

from .cache import CommunityCache
from .communities import Communities
from .context import Result, build
from .graph import BusGraph, GraphSource
from .settings import Limits
from .subgraph import find_subgraph

log = logging.getLogger(__name__)


async def retrieve(request: LazyRagExpandRequest, limits: Limits, cache: CommunityCache,
                   clients: Clients, graph: GraphSource | None = None) -> Result:
    """``graph``: where communities read the entity graph (the triples store's
    services on ``clients`` unless given)."""
    graph = graph or BusGraph(clients)
    if not limits.use_communities:
        return build(request.query, await find_subgraph(
            request, limits.max_entities, limits.max_hops, clients), None)
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
        return build(request.query, subgraph, None)
    found = await _communities(request, cache, graph, version)
    result = build(request.query, subgraph, found[0] if found else None)
    if found:
        result.cache = "hit" if found[1] else "miss"
    return result


def _drop(task: asyncio.Task) -> None:
    """Cancel ``task``, or take its failure if it already failed (not left for the
    garbage collector to log)."""
    task.cancel()
    if task.done() and not task.cancelled():
        task.exception()


async def _communities(request: LazyRagExpandRequest, cache: CommunityCache,
                       graph: GraphSource, version: asyncio.Task
                       ) -> tuple[Communities, bool] | None:
    """The collection's communities, or None when they cannot be had: community
    context enriches an answer, so its failure leaves the answer without it."""
    try:
        return await cache.get((request.user, request.collection), graph, await version)
    except (ServiceError, RequestTimeout, RuntimeError) as failure:
        log.warning("communities of %s/%s unavailable, answering without them: %s",
                    request.user, request.collection, failure)
        return None
