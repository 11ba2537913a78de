"""LazyRAG records (PROTOCOL §2 "lazy-rag", DESIGN §5, docs/lazy-rag.md).

The processor ``lazy-rag`` serves three request/response services:

* ``lazy-rag`` — the answer. Frames as the other RAG services (``RagResponse``:
  ``metadata`` with sources first, ``chunk`` deltas, one final record); the final
  record (or the one non-streaming record) adds the subgraph the answer was written
  from (``entities``, ``relationships``, ``communities``), ``confidence``,
  ``missing_info`` and ``generation_time_ms``. When the LLM fails, that final record
  still carries all of them, with ``summary_error`` in place of the answer;
* ``lazy-rag-expand`` — the same retrieval with no LLM: one record;
* ``lazy-rag-status`` — the settings in force and the community cache's state.

Request limits left unset take the service's settings (``LAZY_RAG_MAX_ENTITIES``,
``LAZY_RAG_MAX_HOPS``, ``LAZY_RAG_USE_COMMUNITIES``: 50, 2, true by default).
"""
from typing import Literal

from pydantic import BaseModel, Field

from .knowledge import Term
from .pipeline import DEFAULT_COLLECTION, DEFAULT_USER
from .record import Error, Record, Response
from .retrieval import RagResponse
from .text_completion import Sampling

MAX_LAZY_QUERY_CHARS = 10_000
MAX_LAZY_ENTITIES = 200
MAX_LAZY_HOPS = 5


class LazyRagSwitch(BaseModel):
    """``LAZY_RAG_ENABLED``, the one switch that turns LazyRAG off: tg-start reads it
    (and leaves the processor out), the processor (and refuses to start), the gateway
    (and answers LazyRAG's routes 404). A mixin of their settings models."""

    lazy_rag_enabled: bool = True


class LazyRagOptions(LazyRagSwitch):
    """LazyRAG's settings (``LAZY_RAG_*``): the processor runs with them, and the
    gateway's settings include them too (it turns LazyRAG's routes off with the
    switch, and reports them while no processor answers)."""

    lazy_rag_max_hops: int = Field(2, ge=1, le=MAX_LAZY_HOPS)
    lazy_rag_max_entities: int = Field(50, ge=1, le=MAX_LAZY_ENTITIES)
    lazy_rag_use_communities: bool = True
    # The model the summary is written with; unset: the text-completion service's own.
    lazy_rag_summary_model: str | None = None


class LazyRagExpandRequest(Record):
    query: str = Field(min_length=1, max_length=MAX_LAZY_QUERY_CHARS)
    user: str = Field(DEFAULT_USER, min_length=1)
    collection: str = Field(DEFAULT_COLLECTION, min_length=1)
    max_entities: int | None = Field(None, ge=1, le=MAX_LAZY_ENTITIES)
    max_hops: int | None = Field(None, ge=1, le=MAX_LAZY_HOPS)
    use_communities: bool | None = None


class LazyRagRequest(LazyRagExpandRequest, Sampling):  # Sampling: for the summary's LLM call
    streaming: bool = False


class LazyEntity(Record):
    """An entity of the subgraph. ``hops``: its distance from the nearest seed (0 for a
    seed); ``score``: how strongly it matched the query (0 for entities only reached by
    expansion); ``community``: id of its finest community, when communities are on."""

    id: str  # the entity's IRI
    label: str = ""
    hops: int = 0
    score: float = 0.0
    community: str | None = None


class LazyRelationship(Record):
    """A triple of the subgraph, as a statement, with where it was extracted from."""

    s: Term
    p: Term
    o: Term
    text: str = ""  # "subject label — predicate label — object label"
    document_id: str = ""
    chunk_id: str = ""


class LazyCommunity(Record):
    """A Leiden community (at ``level``: 0 finest) holding some of the subgraph's
    entities, described at query time by its best-connected members and relations."""

    id: str
    level: int = 0
    size: int = 0  # entities in the whole community, not only in the subgraph
    members: list[str] = []  # labels of its best-connected members
    relations: list[str] = []  # statements among them, most connected first


class _LazyResult(Record):
    entities: list[LazyEntity] | None = None
    relationships: list[LazyRelationship] | None = None
    communities: list[LazyCommunity] | None = None
    confidence: float | None = Field(None, ge=0.0, le=1.0)
    missing_info: list[str] | None = None
    generation_time_ms: float | None = None
    # Whether the communities were cached at the graph's version ("hit") or computed
    # for this request ("miss"); absent when communities were not used.
    community_cache: Literal["hit", "miss"] | None = None


class LazyRagResponse(RagResponse, _LazyResult):
    # The final record's result: the subgraph, and when the LLM failed (no text), why;
    # the confidence and what is missing go beside the text where only text is shown.
    result_fields = (*_LazyResult.model_fields, "summary_error")
    result_error = "summary_error"
    brief_fields = ("confidence", "missing_info")

    summary_error: Error | None = None  # the LLM failed: the rest is still answered


class LazyRagExpandResponse(Response, _LazyResult):
    result_fields = tuple(_LazyResult.model_fields)

    end_of_stream: bool = True


class LazyRagStatusRequest(Record):
    """The status for ``user``; ``collection`` unset: each of the user's cached
    collections."""

    user: str = Field(DEFAULT_USER, min_length=1)
    collection: str | None = None


class CommunityCacheState(Record):
    collection: str
    graph_version: int | None = None  # the triples store's version now (None: unknown)
    cached_version: int | None = None  # the version the cached communities were built at
    fresh: bool = False  # cached and built at the current version
    computing: bool = False
    communities: int = 0  # at the finest level
    levels: int = 0
    entities: int = 0
    computed_at: float | None = None  # unix time
    compute_seconds: float | None = None


class LazyRagStatusResponse(Response):
    enabled: bool = True
    max_hops: int = 2
    max_entities: int = 50
    use_communities: bool = True
    summary_model: str | None = None  # None: the text-completion service's own model
    community_cache: list[CommunityCacheState] = []
    end_of_stream: bool = True
