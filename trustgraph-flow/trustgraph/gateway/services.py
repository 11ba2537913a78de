"""The services the gateway exposes: one row each. Adding a service is one row."""
import json
from dataclasses import dataclass

from trustgraph.schema import (CONFIG_FLOW, LIBRARIAN_FLOW, ConfigRequest, ConfigResponse,
                               DocumentEmbeddingsRequest, DocumentEmbeddingsResponse,
                               DocumentLoadRequest, EmbeddingsRequest, EmbeddingsResponse,
                               GraphEmbeddingsRequest, GraphEmbeddingsResponse,
                               KnowledgeLoadRequest, KnowledgeLoadResponse, LibrarianRequest,
                               LibrarianResponse, LoadResponse, PromptRequest, PromptResponse,
                               Record, Response, TextCompletionRequest,
                               TextCompletionResponse, TextLoadRequest, TriplesQueryRequest,
                               TriplesQueryResponse)

from .framing import Frame, coalesce


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

    def bus_flow(self, flow: str) -> str:
        """The flow the request goes to on the bus."""
        return self.global_flow or flow

    def wire(self, batch: list[Frame]) -> list[Frame]:
        """A batch of bus records as the client gets them: deltas coalesced, hidden
        fields dropped (only rows with hidden fields pay for a decode)."""
        batch = coalesce(batch, self.delta_field)
        if not self.hidden:
            return batch
        return [(_without(data, self.hidden), final) for data, final in batch]


def _without(data: bytes, fields: frozenset[str]) -> bytes:
    record = json.loads(data)
    kept = {key: value for key, value in record.items() if key not in fields}
    return json.dumps(kept, ensure_ascii=False, separators=(",", ":")).encode()


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
    ServiceRow("knowledge-load", KnowledgeLoadRequest, KnowledgeLoadResponse, None),
)}
