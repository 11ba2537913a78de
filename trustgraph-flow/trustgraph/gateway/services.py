"""The services the gateway exposes: one row each. Adding a service is one row."""
import json
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from trustgraph.schema import (
    CONFIG_FLOW,
    LIBRARIAN_FLOW,
    AgentRequest,
    AgentResponse,
    ConfigRequest,
    ConfigResponse,
    CoreRequest,
    CoreResponse,
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

from .framing import Frame, RunKey, coalesce, same_keys
from .metrics import lazy_rag_answered


@dataclass(frozen=True)
class ServiceRow:
    name: str                      # the ``service`` on the socket, ``{kind}`` in REST paths
    request_model: type[Record]
    response_model: type[Response]
    delta_field: str | None        # the text field that streaming records carry as deltas;
                                   # None: the service does not stream, nothing is merged
    global_flow: str | None = None  # a service outside flows: always asked on this flow
                                    # on the bus, whatever flow the client names
    hidden: frozenset[str] = frozenset()  # bus-only fields the wire leaves out (the
                                          # end flag, when the protocol answers ``{}``)
    edges: Callable[[dict], dict | None] | None = None
    # normalises a response's first and final records to the protocol's exact shape
    # (None: unchanged); decoded once each per request, the deltas between pass untouched
    run_key: RunKey = same_keys  # which waiting deltas may be merged (see ``coalesce``)
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
        batch = coalesce(batch, self.delta_field, self.run_key)
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


def agent_run(record: dict) -> Hashable | None:
    """Waiting agent deltas merge only within one message: the same ``chunk_type``
    (a thought never runs into the answer after it) and the same fields. A frame that
    ends its message (every action, the last piece of a thought) stands alone, so a
    client still sees where each thought, observation and answer ends."""
    if record.get("end_of_message") or record.get("end_of_dialog"):
        return None
    return record.get("chunk_type"), frozenset(record)


# LazyRAG is optional (LAZY_RAG_ENABLED); its answers carry the subgraph they were
# written from, the confidence and what is missing, beyond the RAG fields.
LAZY_RAG_HOW = ("to enable it, set LAZY_RAG_ENABLED=true (the default) where tg-start and "
                "the gateway run and restart them, or run the service: tg-run lazy-rag")
LAZY_RAG_RESULT = tuple(name for name in LazyRagResponse.model_fields
                        if name not in RagResponse.model_fields)

# A load is answered ``{}`` (PROTOCOL §2); an error still arrives as ``{"error": ...}``.
LOADED = frozenset({"end_of_stream"})

SERVICES: dict[str, ServiceRow] = {row.name: row for row in (
    ServiceRow("text-completion", TextCompletionRequest, TextCompletionResponse, "response"),
    ServiceRow("prompt", PromptRequest, PromptResponse, "text"),
    ServiceRow("config", ConfigRequest, ConfigResponse, None, global_flow=CONFIG_FLOW),
    ServiceRow("text-load", TextLoadRequest, LoadResponse, None, hidden=LOADED),
    ServiceRow("document-load", DocumentLoadRequest, LoadResponse, None, hidden=LOADED),
    ServiceRow("librarian", LibrarianRequest, LibrarianResponse, None,
               global_flow=LIBRARIAN_FLOW),
    ServiceRow("embeddings", EmbeddingsRequest, EmbeddingsResponse, None),
    ServiceRow("triples", TriplesQueryRequest, TriplesQueryResponse, None),
    ServiceRow("graph-embeddings", GraphEmbeddingsRequest, GraphEmbeddingsResponse, None),
    ServiceRow("document-embeddings", DocumentEmbeddingsRequest, DocumentEmbeddingsResponse,
               None),
    ServiceRow("lexical-search", LexicalSearchRequest, DocumentEmbeddingsResponse, None),
    ServiceRow("knowledge-load", KnowledgeLoadRequest, KnowledgeLoadResponse, None),
    ServiceRow("load-status", LoadStatusRequest, LoadStatusResponse, None),
    ServiceRow("subgraph", SubgraphRequest, SubgraphResponse, None),
    # RAG: the metadata record has no ``chunk``, so it is never merged with the deltas.
    ServiceRow("graph-rag", GraphRagRequest, RagResponse, "chunk", edges=rag_edges),
    ServiceRow("document-rag", DocumentRagRequest, RagResponse, "chunk", edges=rag_edges),
    ServiceRow("agent", AgentRequest, AgentResponse, "content", run_key=agent_run),
    ServiceRow("lazy-rag", LazyRagRequest, LazyRagResponse, "chunk", edges=rag_edges,
               observe=lazy_rag_answered, optional=LAZY_RAG_HOW,
               result_fields=LAZY_RAG_RESULT),
    ServiceRow("lazy-rag-expand", LazyRagExpandRequest, LazyRagExpandResponse, None,
               optional=LAZY_RAG_HOW),
    ServiceRow("lazy-rag-status", LazyRagStatusRequest, LazyRagStatusResponse, None,
               optional=LAZY_RAG_HOW),
    # Knowledge cores, a page at a time (gateway/cores.py streams whole ones).
    ServiceRow("core-documents", CoreRequest, CoreResponse, None, global_flow=LIBRARIAN_FLOW),
    ServiceRow("core-vectors", CoreRequest, CoreResponse, None),
    ServiceRow("core-triples", CoreRequest, CoreResponse, None),
)}

# The services LAZY_RAG_ENABLED=false turns off at the gateway.
LAZY_RAG_SERVICES = ("lazy-rag", "lazy-rag-expand", "lazy-rag-status")
