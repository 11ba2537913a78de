"""LazyRAG's settings (environment variables, or flags of ``tg-run lazy-rag``) and the
limits one request runs with: its own, else these."""
from dataclasses import dataclass

from pydantic import Field

from trustgraph.base import ProcessorSettings
from trustgraph.schema import LazyRagExpandRequest
from trustgraph.schema.lazy_rag import MAX_LAZY_ENTITIES, MAX_LAZY_HOPS


class LazyRagSettings(ProcessorSettings):
    # Read by the registry too: false, and ``tg-start`` leaves the processor out.
    lazy_rag_enabled: bool = True
    lazy_rag_max_hops: int = Field(2, ge=1, le=MAX_LAZY_HOPS)
    lazy_rag_max_entities: int = Field(50, ge=1, le=MAX_LAZY_ENTITIES)
    lazy_rag_use_communities: bool = True
    # The model the summary is written with; unset: the text-completion service's own.
    lazy_rag_summary_model: str | None = None


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
