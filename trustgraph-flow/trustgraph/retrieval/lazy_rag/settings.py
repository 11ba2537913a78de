"""LazyRAG's settings (environment variables, or flags of ``tg-run lazy-rag``) and the
limits one request runs with: its own, else its flow's, else these."""
from dataclasses import dataclass
from typing import TypeVar

from trustgraph.base import FlowParameters, ProcessorSettings
from trustgraph.schema import LazyRagExpandRequest
from trustgraph.schema.lazy_rag import LazyRagOptions

T = TypeVar("T")


class LazyRagSettings(ProcessorSettings, LazyRagOptions):
    """The processor's settings and LazyRAG's own (``LAZY_RAG_*``, shared with the
    gateway)."""


class LazyRagParameters(FlowParameters):
    """A flow's LazyRAG caps (``lazy-rag-max-entities``, ...)."""

    lazy_rag_max_entities: int | None = None
    lazy_rag_max_hops: int | None = None
    lazy_rag_use_communities: bool | None = None


def _chosen(*values: T | None) -> T:
    """The first that is set (the last always is)."""
    value = next((value for value in values if value is not None), None)
    assert value is not None
    return value


@dataclass(frozen=True)
class Limits:
    max_entities: int
    max_hops: int
    use_communities: bool

    @classmethod
    def of(cls, request: LazyRagExpandRequest, settings: LazyRagSettings,
           flow: LazyRagParameters | None = None) -> "Limits":
        flow = flow or LazyRagParameters()
        return cls(
            _chosen(request.max_entities, flow.lazy_rag_max_entities,
                    settings.lazy_rag_max_entities),
            _chosen(request.max_hops, flow.lazy_rag_max_hops, settings.lazy_rag_max_hops),
            _chosen(request.use_communities, flow.lazy_rag_use_communities,
                    settings.lazy_rag_use_communities))
