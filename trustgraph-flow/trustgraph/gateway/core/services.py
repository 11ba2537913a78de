"""The services the gateway exposes: one row each, with who may use it. Adding a
service is one row.

Data only: who may is applied by ``access.authorize``, how a row's answers are
shaped for the wire by ``dispatch.wired`` (by what the row's response model
declares), and the rows are the OpenAPI document's paths and docs/gateway.md's role
table (a test holds the two the same). A service of several operations (its request
record's ``operation``, declared in the schema) needs a permission per operation:
its row is refused at import unless it names each declared operation, and only those
(``per_operation``)."""
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from trustgraph.schema import (
    COLLECTIONS_FLOW,
    CONFIG_FLOW,
    FLOW_SERVICE_FLOW,
    KEYS_FLOW,
    LIBRARIAN_FLOW,
    AgentRequest,
    AgentResponse,
    CollectionManagementRequest,
    CollectionManagementResponse,
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
    FlowRequest,
    FlowResponse,
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
from trustgraph.schema.operations import operations_of, per_operation

from .permissions import ADMIN, ASK, INTERNAL, READ, WRITE, Permission


@dataclass(frozen=True)
class ServiceRow:
    name: str                      # the ``service`` on the socket, ``{kind}`` in REST paths
    request_model: type[Record]
    # also how the wire shows it (``Response.wire_*``, applied by ``dispatch.wired``),
    # its delta field and merge rule (``coalesce``)
    response_model: type[Response]
    # who may: the service's permission, or one per operation of a service of several
    needs: Permission | Mapping[str, Permission]
    global_flow: str | None = None  # a service outside flows: always asked on this flow
                                    # on the bus, whatever flow the client names
    # operations that start or stop flows: the gateway reads the running flows again
    # before it answers (``Dispatcher.frames``)
    changes_flows: frozenset[str] = frozenset()
    # What a request to ``POST /api/v1/{service}`` (TrustGraph's surface for a
    # service outside flows) means by a field it leaves out, where that differs from
    # the record's default (config: values as JSON text, as TrustGraph's client
    # writes and reads them).
    global_defaults: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        what = f"the permissions of service {self.name!r}"
        if not isinstance(self.needs, Permission):
            per_operation(self.request_model, self.needs, what)
        elif operations := operations_of(self.request_model):
            raise TypeError(f"{what}: one for each of its operations ({', '.join(operations)})")

    def permission(self, operation: str | None = None) -> Permission:
        """What the service (``operation`` of it) needs; an operation it does not
        have needs what nobody has."""
        if isinstance(self.needs, Permission):
            return self.needs
        return self.needs.get(operation or "", INTERNAL)

    def permissions(self) -> Mapping[str | None, Permission]:
        """Each operation's permission; a service of one operation: None's."""
        if isinstance(self.needs, Permission):
            return {None: self.needs}
        return {operation: needs for operation, needs in self.needs.items()}

    def as_global(self, record: Record) -> Record:
        """``record`` as sent to ``POST /api/v1/{service}``: ``global_defaults`` for
        the fields it left out."""
        unset = {name: value for name, value in self.global_defaults.items()
                 if name not in record.model_fields_set}
        return record.model_copy(update=unset) if unset else record

    def bus_flow(self, flow: str) -> str:
        """The flow the request goes to on the bus."""
        return self.global_flow or flow

    @cached_property
    def reshapes_edges(self) -> bool:  # asked per batch (dispatch.wired): looked up once
        return self.response_model.reshapes_edges()


# Knowledge cores, a page at a time (apis/cores.py streams whole ones): out as
# reading, in as writing.
CORE_PAGES = {"count": READ, "export": READ, "import": WRITE}

SERVICES: dict[str, ServiceRow] = {row.name: row for row in (
    # Answers: each calls the LLM.
    ServiceRow("text-completion", TextCompletionRequest, TextCompletionResponse, ASK),
    ServiceRow("prompt", PromptRequest, PromptResponse, ASK),
    # RAG: the metadata record has no ``chunk``, so it is never merged with the deltas.
    ServiceRow("graph-rag", GraphRagRequest, RagResponse, ASK),
    ServiceRow("document-rag", DocumentRagRequest, RagResponse, ASK),
    ServiceRow("lazy-rag", LazyRagRequest, LazyRagResponse, ASK),
    # its sessions are the user's; its tools are config (the admin's)
    ServiceRow("agent", AgentRequest, AgentResponse, ASK),
    # Searches and reads of the user's own data.
    ServiceRow("lazy-rag-expand", LazyRagExpandRequest, LazyRagExpandResponse, READ),
    ServiceRow("lazy-rag-status", LazyRagStatusRequest, LazyRagStatusResponse, READ),
    ServiceRow("embeddings", EmbeddingsRequest, EmbeddingsResponse, READ),
    ServiceRow("triples", TriplesQueryRequest, TriplesQueryResponse, READ),
    ServiceRow("graph-embeddings", GraphEmbeddingsRequest, GraphEmbeddingsResponse, READ),
    ServiceRow("document-embeddings", DocumentEmbeddingsRequest,
               DocumentEmbeddingsResponse, READ),
    ServiceRow("lexical-search", LexicalSearchRequest, DocumentEmbeddingsResponse, READ),
    ServiceRow("subgraph", SubgraphRequest, SubgraphResponse, READ),
    ServiceRow("load-status", LoadStatusRequest, LoadStatusResponse, READ),
    # Writes to the user's own data.
    ServiceRow("text-load", TextLoadRequest, LoadResponse, WRITE),
    ServiceRow("document-load", DocumentLoadRequest, LoadResponse, WRITE),
    ServiceRow("knowledge-load", KnowledgeLoadRequest, KnowledgeLoadResponse, WRITE),
    # re-embeds the user's own collection with the configured model
    ServiceRow("reembed", ReembedRequest, ReembedResponse, WRITE),
    ServiceRow("core-documents", CoreRequest, CoreResponse, CORE_PAGES,
               global_flow=LIBRARIAN_FLOW),
    ServiceRow("core-vectors", CoreRequest, CoreResponse, CORE_PAGES),
    ServiceRow("core-triples", CoreRequest, CoreResponse, CORE_PAGES),
    ServiceRow("librarian", LibrarianRequest, LibrarianResponse, {
        "list-documents": READ, "list-collections": READ, "get-document-metadata": READ,
        "get-document-content": READ, "add-document": WRITE, "remove-document": WRITE,
        "add-processing": WRITE, "begin-upload": WRITE, "upload-part": WRITE,
        "complete-upload": WRITE,
    }, global_flow=LIBRARIAN_FLOW, global_defaults={"trustgraph_names": True}),
    # the user's collections; a delete removes everything in one from every store
    ServiceRow("collection-management", CollectionManagementRequest,
               CollectionManagementResponse, {
                   "list-collections": READ, "update-collection": WRITE,
                   "delete-collection": WRITE,
               }, global_flow=COLLECTIONS_FLOW),
    # prompts, tools (an MCP tool's URL), flows: everyone's answers run on them
    ServiceRow("config", ConfigRequest, ConfigResponse, {
        "get": WRITE, "list": WRITE, "getvalues": WRITE, "config": WRITE,
        "put": ADMIN, "delete": ADMIN,
    }, global_flow=CONFIG_FLOW,
        # TrustGraph's client puts and reads every value as a string of JSON text
        global_defaults={"value_format": "text"}),
    # blueprints and flows: everyone may see them, only admins change them
    ServiceRow("flow", FlowRequest, FlowResponse, {
        "list-blueprints": READ, "get-blueprint": READ, "list-flows": READ, "get-flow": READ,
        "put-blueprint": ADMIN, "delete-blueprint": ADMIN, "start-flow": ADMIN,
        "stop-flow": ADMIN,
    }, global_flow=FLOW_SERVICE_FLOW, changes_flows=frozenset({"start-flow", "stop-flow"})),
    ServiceRow("keys", KeysRequest, KeysResponse, {
        "add-user": ADMIN, "list-users": ADMIN, "create-key": ADMIN, "list-keys": ADMIN,
        "revoke-key": ADMIN, "usage": ADMIN,
        "verifiers": INTERNAL, "record-use": INTERNAL,  # the gateway's own, on the bus
    }, global_flow=KEYS_FLOW),
)}
