"""Gateway metrics: counted per request and per socket, never per chunk.

The lazy-rag service runs in a process of its own with no HTTP port, so its metrics
are counted here, where every lazy-rag request passes (websocket and REST alike),
from the final record it answers with.
"""
import json

from prometheus_client import Counter, Gauge, Histogram

REQUESTS = Counter("tg_gateway_requests_total", "Requests accepted by the gateway",
                   ["service", "transport"])
ERRORS = Counter("tg_gateway_errors_total", "Gateway-level errors answered", ["type"])
SOCKETS = Gauge("tg_gateway_open_sockets", "Open websocket connections")

LAZY_RAG_SECONDS = Histogram(
    "lazy_rag_query_duration_seconds", "LazyRAG answers: request to final record",
    buckets=(.05, .1, .25, .5, 1, 2, 3, 5, 10, 30, 60, 120))
COMMUNITY_CACHE_HITS = Counter(
    "lazy_rag_community_cache_hits", "LazyRAG answers whose communities were cached")
COMMUNITY_CACHE_MISSES = Counter(
    "lazy_rag_community_cache_misses",
    "LazyRAG answers that had to compute their collection's communities first")


def lazy_rag_answered(seconds: float, final: bytes) -> None:
    """One lazy-rag answer: its duration, and whether its communities were cached (an
    answer without communities, or a failed one, counts neither)."""
    LAZY_RAG_SECONDS.observe(seconds)
    record = json.loads(final)
    cache = record.get("community_cache") if isinstance(record, dict) else None
    if cache == "hit":
        COMMUNITY_CACHE_HITS.inc()
    elif cache == "miss":
        COMMUNITY_CACHE_MISSES.inc()
