"""The services the gateway exposes: one row each. Adding a service is one row."""
import json
from collections.abc import Callable
from dataclasses import dataclass

from trustgraph.base import coalesce
from trustgraph.schema import (
    CONFIG_FLOW,
    LIBRARIAN_FLOW,
    AgentRequest,
    AgentResponse,
    ConfigRequest,
    ConfigResponse,
    DocumentEmbeddingsRequest,
    DocumentEmbeddingsResponse,
    DocumentLoadRequest,
    DocumentRagRequest,
    EmbeddingsRequest,
    EmbeddingsResponse,
    GraphEmbeddingsRequest,
    GraphEmbeddingsResponse,
    GraphRagRequest,
    KnowledgeLoadRequest,
    KnowledgeLoadResponse,
    LazyRagExpandRequest,
    LazyRagExpandResponse,
    LazyRagRequest,
    LazyRagResponse,
    LazyRagStatusRequest,
    LazyRagStatusResponse,
    LexicalSearchRequest,
    LibrarianRequest,
    LibrarianResponse,
    LoadResponse,
    LoadStatusRequest,
    LoadStatusResponse,
    PromptRequest,
    PromptResponse,
    RagResponse,
    Record,
    Response,
    SubgraphRequest,
    SubgraphResponse,
    TextCompletionRequest,
    TextCompletionResponse,
    TextLoadRequest,
    TriplesQueryRequest,
    TriplesQueryResponse,
)

from .framing import Frame
from .metrics import lazy_rag_answered


@dataclass(frozen=True)
class ServiceRow:
    name: str                      # the ``service`` on the socket, ``{kind}`` in REST paths
    request_model: type[Record]
    response_model: type[Response]  # its delta field and merge rule: see ``coalesce``
    global_flow: str | None = None  # a service outside flows: always asked on this flow
                                    # on the bus, whatever flow the client names
    hidden: frozenset[str] = frozenset()  # bus-only fields the wire leaves out (the
                                          # end flag, when the protocol answers ``{}``)
    edges: Callable[[dict], dict | None] | None = None
    # normalises a response's first and final records to the protocol's exact shape
    # (None: unchanged); decoded once each per request, the deltas between pass untouched
    observe: Callable[[float, bytes], None] | None = None
    # given the seconds a request took and its final record, whatever transport carried
    # it: for metrics of the service's own (None: nothing beyond the request counts)
    optional: str | None = None
    # a service a stack may run without: how to turn it on. Turned off in the gateway's
    # settings, or with no processor taking its requests, it is a 404 saying this
    result_fields: tuple[str, ...] = ()
    # fields of an answer's final record beyond RAG's own that the answer-stream API
    # passes on (its ``done`` line and collected answer)

    def bus_flow(self, flow: str) -> str:
        """The flow the request goes to on the bus."""
        return self.global_flow or flow

    def wire(self, batch: list[Frame], first: bool = False) -> list[Frame]:
        """A batch of bus records as the client gets them: deltas coalesced, the
        edges normalised (``first``: this batch opens the response), hidden fields
        dropped (only rows with hidden fields pay for a decode of every record)."""
        batch = coalesce(batch, self.response_model)
        if self.edges is not None:
            batch = [_edge(data, final, self.edges) if final or (first and i == 0)
                     else (data, final) for i, (data, final) in enumerate(batch)]
        if not self.hidden:
            return batch
        return [(_without(data, self.hidden), final) for data, final in batch]


def _edge(data: bytes, final: bool, edges: Callable[[dict], dict | None]) -> Frame:
    record = json.loads(data)
    shaped = edges(record) if isinstance(record, dict) else None
    return (data if shaped is None else _encoded(shaped)), final


def _without(data: bytes, fields: frozenset[str]) -> bytes:
    record = json.loads(data)
    return _encoded({key: value for key, value in record.items() if key not in fields})


def _encoded(record: dict) -> bytes:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()


# What a RAG metadata record always shows, even when the service left it unset.
METADATA_DEFAULTS = {"sources": [], "optimized_query": None, "subqueries": []}


def rag_edges(record: dict) -> dict | None:
    """PROTOCOL §2 exactly, whatever a RAG service left out: the metadata record always
    has ``sources``, ``optimized_query`` (null when the question was not rewritten) and
    ``subqueries``; a streaming final record (a ``chunk`` record) never carries the whole
    ``response`` again, so a client that joins every frame's text sees it once."""
    kind = record.get("message_type")
    if kind == "metadata":
        missing = {key: value for key, value in METADATA_DEFAULTS.items() if key not in record}
        return {**record, **missing} if missing else None
    if kind == "chunk" and "response" in record:
        return {key: value for key, value in record.items() if key != "response"}
    return None


# LazyRAG is optional (LAZY_RAG_ENABLED); its answers carry the subgraph they were
# written from, the confidence and what is missing, beyond the RAG fields.
LAZY_RAG_HOW = ("to enable it, set LAZY_RAG_ENABLED=true (the default) where tg-start and "
                "the gateway run and restart them, or run the service: tg-run lazy-rag")
LAZY_RAG_RESULT = tuple(name for name in LazyRagResponse.model_fields
                        if name not in RagResponse.model_fields)

# A load is answered ``{}`` (PROTOCOL §2); an error still arrives as ``{"error": ...}``.
LOADED = frozenset({"end_of_stream"})

SERVICES: dict[str, ServiceRow] = {row.name: row for row in (
    ServiceRow("text-completion", TextCompletionRequest, TextCompletionResponse),
    ServiceRow("prompt", PromptRequest, PromptResponse),
    ServiceRow("config", ConfigRequest, ConfigResponse, global_flow=CONFIG_FLOW),
    ServiceRow("text-load", TextLoadRequest, LoadResponse, hidden=LOADED),
    ServiceRow("document-load", DocumentLoadRequest, LoadResponse, hidden=LOADED),
    ServiceRow("librarian", LibrarianRequest, LibrarianResponse,
               global_flow=LIBRARIAN_FLOW),
    ServiceRow("embeddings", EmbeddingsRequest, EmbeddingsResponse),
    ServiceRow("triples", TriplesQueryRequest, TriplesQueryResponse),
    ServiceRow("graph-embeddings", GraphEmbeddingsRequest, GraphEmbeddingsResponse),
    ServiceRow("document-embeddings", DocumentEmbeddingsRequest, DocumentEmbeddingsResponse),
    ServiceRow("lexical-search", LexicalSearchRequest, DocumentEmbeddingsResponse),
    ServiceRow("knowledge-load", KnowledgeLoadRequest, KnowledgeLoadResponse),
    ServiceRow("load-status", LoadStatusRequest, LoadStatusResponse),
    ServiceRow("subgraph", SubgraphRequest, SubgraphResponse),
    # RAG: the metadata record has no ``chunk``, so it is never merged with the deltas.
    ServiceRow("graph-rag", GraphRagRequest, RagResponse, edges=rag_edges),
    ServiceRow("document-rag", DocumentRagRequest, RagResponse, edges=rag_edges),
    ServiceRow("agent", AgentRequest, AgentResponse),
    ServiceRow("lazy-rag", LazyRagRequest, LazyRagResponse, edges=rag_edges,
               observe=lazy_rag_answered, optional=LAZY_RAG_HOW,
               result_fields=LAZY_RAG_RESULT),
    ServiceRow("lazy-rag-expand", LazyRagExpandRequest, LazyRagExpandResponse,
               optional=LAZY_RAG_HOW),
    ServiceRow("lazy-rag-status", LazyRagStatusRequest, LazyRagStatusResponse,
               optional=LAZY_RAG_HOW),
)}

# The services LAZY_RAG_ENABLED=false turns off at the gateway.
LAZY_RAG_SERVICES = ("lazy-rag", "lazy-rag-expand", "lazy-rag-status")
