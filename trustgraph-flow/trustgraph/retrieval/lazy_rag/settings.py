"""LazyRAG's settings (environment variables, or flags of ``tg-run lazy-rag``) and the
limits one request runs with: its own, else these."""
from dataclasses import dataclass

from trustgraph.base import ProcessorSettings
from trustgraph.schema import LazyRagExpandRequest
from trustgraph.schema.lazy_rag import LazyRagOptions


class LazyRagSettings(ProcessorSettings, LazyRagOptions):
    """The processor's settings and LazyRAG's own (``LAZY_RAG_*``, shared with the
    gateway)."""


@dataclass(frozen=True)
class Limits:
    max_entities: int
    max_hops: int
    use_communities: bool

    @classmethod
    def of(cls, request: LazyRagExpandRequest, settings: LazyRagSettings) -> "Limits":
        def chosen(value, default):
            return default if value is None else value
        return cls(chosen(request.max_entities, settings.lazy_rag_max_entities),
                   chosen(request.max_hops, settings.lazy_rag_max_hops),
                   chosen(request.use_communities, settings.lazy_rag_use_communities))
