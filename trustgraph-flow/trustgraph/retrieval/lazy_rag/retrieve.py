"""Everything LazyRAG does before the LLM: the subgraph, its communities, and the
result records with confidence and missing information. ``expand`` answers with
this alone; a query then writes the summary from it."""
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
    subgraph = await find_subgraph(request, limits.max_entities, limits.max_hops, clients)
    if not (limits.use_communities and subgraph.entities):
        return build(request.query, subgraph, None)
    found = await _communities(request, cache, graph or BusGraph(clients))
    result = build(request.query, subgraph, found[0] if found else None)
    if found:
        result.cache = "hit" if found[1] else "miss"
    return result


async def _communities(request: LazyRagExpandRequest, cache: CommunityCache,
                       graph: GraphSource) -> tuple[Communities, bool] | None:
    """The collection's communities, or None when they cannot be had: community
    context enriches an answer, so its failure leaves the answer without it."""
    try:
        return await cache.get((request.user, request.collection), graph)
    except (ServiceError, RequestTimeout, RuntimeError) as failure:
        log.warning("communities of %s/%s unavailable, answering without them: %s",
                    request.user, request.collection, failure)
        return None
