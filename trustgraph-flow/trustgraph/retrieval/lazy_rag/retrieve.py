"""Everything LazyRAG does before the LLM: the subgraph, its communities, and the
result records with confidence and missing information. ``expand`` answers with
this alone; a query then writes the summary from it."""
from trustgraph.base import Clients
from trustgraph.schema import LazyRagExpandRequest

from ..steps import step
from .cache import CommunityCache
from .context import Result, build
from .graph import BusGraph, GraphSource
from .settings import Limits
from .subgraph import ERROR, find_subgraph


async def retrieve(request: LazyRagExpandRequest, limits: Limits, cache: CommunityCache,
                   clients: Clients, graph: GraphSource | None = None) -> Result:
    """``graph``: where communities read the entity graph (the triples store's
    services on ``clients`` unless given)."""
    subgraph = await find_subgraph(request, limits.max_entities, limits.max_hops, clients)
    if not (limits.use_communities and subgraph.entities):
        return build(request.query, subgraph, None)
    with step(ERROR, "finding the collection's communities"):
        communities, hit = await cache.get((request.user, request.collection),
                                           graph or BusGraph(clients))
    result = build(request.query, subgraph, communities)
    result.cache = "hit" if hit else "miss"
    return result
