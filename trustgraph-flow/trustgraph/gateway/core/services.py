"""The services the gateway exposes: one row each. Adding a service is one row."""
import json
from dataclasses import dataclass
from functools import cached_property

from trustgraph.base import coalesce
from trustgraph.schema import (
    CONFIG_FLOW,
    KEYS_FLOW,
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
    KeysRequest,
    KeysResponse,
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
    ReembedRequest,
    ReembedResponse,
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


@dataclass(frozen=True)
class ServiceRow:
    name: str                      # the ``service`` on the socket, ``{kind}`` in REST paths
    request_model: type[Record]
    # also how the wire shows it (``Response.wire_*``), its delta field and merge rule
    # (``coalesce``)
    response_model: type[Response]
    global_flow: str | None = None  # a service outside flows: always asked on this flow
                                    # on the bus, whatever flow the client names

    def bus_flow(self, flow: str) -> str:
        """The flow the request goes to on the bus."""
        return self.global_flow or flow

    @cached_property
    def _reshapes_edges(self) -> bool:  # asked per batch: looked up once
        return self.response_model.reshapes_edges()

    def wire(self, batch: list[Frame], first: bool = False) -> list[Frame]:
        """A batch of bus records as the client gets them: deltas coalesced, the
        edges shaped by the response model (``first``: this batch opens the
        response), its hidden fields dropped. Only a response model that declares
        either pays for decoding records."""
        batch = coalesce(batch, self.response_model)
        model = self.response_model
        if self._reshapes_edges:
            batch = [_edge(data, final, model) if final or (first and i == 0)
                     else (data, final) for i, (data, final) in enumerate(batch)]
        if not model.wire_hidden:
            return batch
        return [(_without(data, model.wire_hidden), final) for data, final in batch]


def _edge(data: bytes, final: bool, model: type[Response]) -> Frame:
    record = json.loads(data)
    shaped = model.wire_edge(record) if isinstance(record, dict) else None
    return (data if shaped is None else _encoded(shaped)), final


def _without(data: bytes, fields: frozenset[str]) -> bytes:
    record = json.loads(data)
    return _encoded({key: value for key, value in record.items() if key not in fields})


def _encoded(record: dict) -> bytes:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()


SERVICES: dict[str, ServiceRow] = {row.name: row for row in (
    ServiceRow("text-completion", TextCompletionRequest, TextCompletionResponse),
    ServiceRow("prompt", PromptRequest, PromptResponse),
    ServiceRow("config", ConfigRequest, ConfigResponse, global_flow=CONFIG_FLOW),
    ServiceRow("text-load", TextLoadRequest, LoadResponse),
    ServiceRow("document-load", DocumentLoadRequest, LoadResponse),
    ServiceRow("librarian", LibrarianRequest, LibrarianResponse,
               global_flow=LIBRARIAN_FLOW),
    ServiceRow("keys", KeysRequest, KeysResponse, global_flow=KEYS_FLOW),
    ServiceRow("embeddings", EmbeddingsRequest, EmbeddingsResponse),
    ServiceRow("triples", TriplesQueryRequest, TriplesQueryResponse),
    ServiceRow("graph-embeddings", GraphEmbeddingsRequest, GraphEmbeddingsResponse),
    ServiceRow("document-embeddings", DocumentEmbeddingsRequest, DocumentEmbeddingsResponse),
    ServiceRow("lexical-search", LexicalSearchRequest, DocumentEmbeddingsResponse),
    ServiceRow("reembed", ReembedRequest, ReembedResponse),
    ServiceRow("knowledge-load", KnowledgeLoadRequest, KnowledgeLoadResponse),
    ServiceRow("load-status", LoadStatusRequest, LoadStatusResponse),
    ServiceRow("subgraph", SubgraphRequest, SubgraphResponse),
    # RAG: the metadata record has no ``chunk``, so it is never merged with the deltas.
    ServiceRow("graph-rag", GraphRagRequest, RagResponse),
    ServiceRow("document-rag", DocumentRagRequest, RagResponse),
    ServiceRow("agent", AgentRequest, AgentResponse),
    ServiceRow("lazy-rag", LazyRagRequest, LazyRagResponse),
    ServiceRow("lazy-rag-expand", LazyRagExpandRequest, LazyRagExpandResponse),
    ServiceRow("lazy-rag-status", LazyRagStatusRequest, LazyRagStatusResponse),
    # Knowledge cores, a page at a time (apis/cores.py streams whole ones).
    ServiceRow("core-documents", CoreRequest, CoreResponse, global_flow=LIBRARIAN_FLOW),
    ServiceRow("core-vectors", CoreRequest, CoreResponse),
    ServiceRow("core-triples", CoreRequest, CoreResponse),
)}
