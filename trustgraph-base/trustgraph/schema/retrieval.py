"""GraphRAG and DocumentRAG records (PROTOCOL §2, DESIGN §5).

A streaming answer is, in order: one ``metadata`` record (sources, the rewritten
question, sub-questions), ``chunk`` records carrying answer deltas, and one final
``chunk`` record with no text, ``end_of_stream`` and ``end_of_session`` true, the
sources again and the token totals. A non-streaming answer is one record with the full
``response``. An error is always one final record.
"""
from typing import Any, Literal, Self

from pydantic import Field

from .knowledge import Term
from .pipeline import DEFAULT_COLLECTION, DEFAULT_USER
from .record import Error, Record, Response
from .text_completion import Sampling

MAX_QUERY_CHARS = 20_000


class _RagRequest(Sampling):  # max_tokens, temperature, stop: for the answer's LLM call
    """A RAG question. Written with only the fields its sender set: a field left
    unset takes its flow's parameter of the same name (``entity-limit``, ``doc-limit``,
    ``rerank``, ...) where the flow sets one, else the default below."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    user: str = Field(DEFAULT_USER, min_length=1)
    collection: str = Field(DEFAULT_COLLECTION, min_length=1)
    streaming: bool = False
    optimize_query: bool = False  # rewrite the question (``query-rewrite``) first
    subqueries: bool = False  # decompose it (``query-decompose``); retrieve for each
    # Streaming only: send ``progress`` records while retrieving (opt-in: clients
    # that do not ask never see the message type).
    progress: bool = False

    def encoded(self) -> bytes:
        return self.model_dump_json(exclude_none=True, exclude_unset=True).encode()


class GraphRagRequest(_RagRequest):
    entity_limit: int = Field(50, ge=1, le=1000)
    triple_limit: int = Field(30, ge=1, le=1000)  # triples followed per entity per hop
    max_subgraph_size: int = Field(150, ge=1, le=5000)
    max_path_length: int = Field(2, ge=1, le=5)


# How chunks are found: nearest vectors, best BM25 word matches, or both fused by
# reciprocal rank (``trustgraph.retrieval.search``). Absent: the service's default.
Retrieval = Literal["vector", "lexical", "hybrid"]


class DocumentRagRequest(_RagRequest):
    doc_limit: int = Field(20, ge=1, le=500)
    retrieval: Retrieval | None = None
    # Reorder the chunks found with the ``rerank`` prompt through the LLM before
    # answering (``trustgraph.retrieval.rerank``): opt-in, it costs an LLM call.
    rerank: bool = False


class Source(Record):
    """One piece of evidence. A chunk: ``id`` (chunk id), ``document_id``, ``title``,
    ``text``, ``distance`` (cosine distance to the question, lower is nearer). A graph
    triple adds ``s``, ``p``, ``o`` (``text`` is the statement as the LLM saw it;
    ``id``/``document_id`` are the chunk and document it was extracted from)."""

    id: str = ""
    document_id: str = ""
    title: str = ""
    text: str = ""
    distance: float | None = None
    s: Term | None = None
    p: Term | None = None
    o: Term | None = None
    # Citation details (seed 001's source schema), each present only when known, so
    # older readers see the fields above unchanged.
    author: str | None = None
    order: int | None = None  # the chunk's index in its document
    page_range: list[int] | None = None  # [first, last] page (PDF)
    header_titles: list[str] | None = None  # heading path above the chunk
    char_range: list[int] | None = None  # [start, end) in the decoded text
    # What each retriever that found it scored: "vector" (cosine similarity),
    # "lexical" (BM25), "fused" (reciprocal-rank fusion); graph sources: "seed"
    # (the seed entity's similarity), "hops", "pagerank".
    scores: dict[str, float] | None = None


# What a RAG answer's first record always shows on the wire, even when the service
# left it unset (``RagResponse.opening``).
METADATA_DEFAULTS: dict[str, Any] = {"sources": [], "optimized_query": None, "subqueries": []}


class RagResponse(Response):
    delta_field = "chunk"
    delta_marks = {"message_type": "chunk"}
    whole_field = "response"
    opening = METADATA_DEFAULTS
    progress_field = "progress"

    message_type: Literal["metadata", "chunk", "progress"] | None = None  # streaming only
    chunk: str | None = None  # a streamed delta
    progress: str | None = None  # what retrieval is doing ("progress" records, opt-in)
    response: str | None = None  # the full answer (non-streaming)
    end_of_session: bool | None = None
    sources: list[Source] | None = None
    optimized_query: str | None = None
    subqueries: list[str] | None = None
    in_token: int | None = None
    out_token: int | None = None
    model: str | None = None

    @classmethod
    def failure(cls, error: Error) -> Self:
        return cls(error=error, end_of_stream=True, end_of_session=True)

    @classmethod
    def wire_edge(cls, record: dict[str, Any]) -> dict[str, Any] | None:
        """PROTOCOL §2 exactly, whatever a RAG service left out: the metadata record
        always has ``sources``, ``optimized_query`` (null when the question was not
        rewritten) and ``subqueries``; a streaming final record (a ``chunk`` record)
        never carries the whole ``response`` again, so a client that joins every
        frame's text sees it once."""
        kind = record.get("message_type")
        if kind == "metadata":
            missing = {key: value for key, value in cls.opening.items()
                       if key not in record}
            return {**record, **missing} if missing else None
        if kind == "chunk" and "response" in record:
            return {key: value for key, value in record.items() if key != "response"}
        return None


# One record shape serves both services; the names say which one a module speaks.
GraphRagResponse = RagResponse
DocumentRagResponse = RagResponse
