"""The services the gateway exposes: one row each. Adding a service is one row."""
import json
from collections.abc import Hashable
from dataclasses import dataclass
from functools import cached_property

from trustgraph.schema import (
    CONFIG_FLOW,
    KEYS_FLOW,
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

from .framing import Frame, RunKey, coalesce, same_keys


@dataclass(frozen=True)
class ServiceRow:
    name: str                      # the ``service`` on the socket, ``{kind}`` in REST paths
    request_model: type[Record]
    response_model: type[Response]  # also how the wire shows it (``Response.wire_*``)
    delta_field: str | None        # the text field that streaming records carry as deltas;
                                   # None: the service does not stream, nothing is merged
    global_flow: str | None = None  # a service outside flows: always asked on this flow
                                    # on the bus, whatever flow the client names
    run_key: RunKey = same_keys  # which waiting deltas may be merged (see ``coalesce``)

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
        batch = coalesce(batch, self.delta_field, self.run_key)
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


def agent_run(record: dict) -> Hashable | None:
    """Waiting agent deltas merge only within one message: the same ``chunk_type``
    (a thought never runs into the answer after it) and the same fields. A frame that
    ends its message (every action, the last piece of a thought) stands alone, so a
    client still sees where each thought, observation and answer ends."""
    if record.get("end_of_message") or record.get("end_of_dialog"):
        return None
    return record.get("chunk_type"), frozenset(record)


SERVICES: dict[str, ServiceRow] = {row.name: row for row in (
    ServiceRow("text-completion", TextCompletionRequest, TextCompletionResponse, "response"),
    ServiceRow("prompt", PromptRequest, PromptResponse, "text"),
    ServiceRow("config", ConfigRequest, ConfigResponse, None, global_flow=CONFIG_FLOW),
    ServiceRow("text-load", TextLoadRequest, LoadResponse, None),
    ServiceRow("document-load", DocumentLoadRequest, LoadResponse, None),
    ServiceRow("librarian", LibrarianRequest, LibrarianResponse, None,
               global_flow=LIBRARIAN_FLOW),
    ServiceRow("keys", KeysRequest, KeysResponse, None, global_flow=KEYS_FLOW),
    ServiceRow("embeddings", EmbeddingsRequest, EmbeddingsResponse, None),
    ServiceRow("triples", TriplesQueryRequest, TriplesQueryResponse, None),
    ServiceRow("graph-embeddings", GraphEmbeddingsRequest, GraphEmbeddingsResponse, None),
    ServiceRow("document-embeddings", DocumentEmbeddingsRequest, DocumentEmbeddingsResponse,
               None),
    ServiceRow("lexical-search", LexicalSearchRequest, DocumentEmbeddingsResponse, None),
    ServiceRow("reembed", ReembedRequest, ReembedResponse, None),
    ServiceRow("knowledge-load", KnowledgeLoadRequest, KnowledgeLoadResponse, None),
    ServiceRow("load-status", LoadStatusRequest, LoadStatusResponse, None),
    ServiceRow("subgraph", SubgraphRequest, SubgraphResponse, None),
    # RAG: the metadata record has no ``chunk``, so it is never merged with the deltas.
    ServiceRow("graph-rag", GraphRagRequest, RagResponse, "chunk"),
    ServiceRow("document-rag", DocumentRagRequest, RagResponse, "chunk"),
    ServiceRow("agent", AgentRequest, AgentResponse, "content", run_key=agent_run),
    ServiceRow("lazy-rag", LazyRagRequest, LazyRagResponse, "chunk"),
    ServiceRow("lazy-rag-expand", LazyRagExpandRequest, LazyRagExpandResponse, None),
    ServiceRow("lazy-rag-status", LazyRagStatusRequest, LazyRagStatusResponse, None),
)}
