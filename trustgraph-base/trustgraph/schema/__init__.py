"""Every record on the bus and the gateway wire (PROTOCOL §4), and topic names."""
from .agent import AgentRequest, AgentResponse, AgentStep
from .cancel import Cancel
from .collections import (
    COLLECTION_OWNERS,
    COLLECTIONS_FLOW,
    CollectionDeleteRequest,
    CollectionDeleteResponse,
    CollectionManagementRequest,
    CollectionManagementResponse,
    CollectionMetadata,
)
from .config import (
    CONFIG_FLOW,
    CONFIG_NOTIFY_TOPIC,
    ConfigKey,
    ConfigNotify,
    ConfigRequest,
    ConfigResponse,
    ConfigValue,
)
from .cores import (
    CORE_SERVICES,
    CoreChunk,
    CoreDocument,
    CoreEntity,
    CoreRequest,
    CoreResponse,
    CoreTriple,
)
from .embeddings import EmbeddingsRequest, EmbeddingsResponse
from .flows import FLOW_SERVICE_FLOW, FlowRequest, FlowResponse
from .keys import (
    KEYS_CHANGED,
    KEYS_FLOW,
    ROLES,
    ApiKey,
    KeyLimits,
    KeysRequest,
    KeysResponse,
    KeyUse,
    KeyVerifier,
    Role,
    UserInfo,
)
from .knowledge import RDFS_LABEL, Term, Triple
from .knowledge_load import KnowledgeLoadRequest, KnowledgeLoadResponse
from .lazy_rag import (
    CommunityCacheState,
    LazyCommunity,
    LazyEntity,
    LazyRagExpandRequest,
    LazyRagExpandResponse,
    LazyRagRequest,
    LazyRagResponse,
    LazyRagStatusRequest,
    LazyRagStatusResponse,
    LazyRelationship,
)
from .librarian import (
    LIBRARIAN_FLOW,
    CollectionInfo,
    DocumentMetadata,
    LibrarianRequest,
    LibrarianResponse,
    ProcessingMetadata,
)
from .load_status import (
    ChunkCountRequest,
    ChunkCountResponse,
    ChunkSet,
    DocumentStatus,
    LoadStatusRequest,
    LoadStatusResponse,
)
from .pipeline import (
    Chunk,
    ChunkEntities,
    ChunkTriples,
    ChunkVector,
    DecodeWork,
    DocumentLoadRequest,
    DocumentRef,
    DocumentRemoved,
    EntityContext,
    EntityVector,
    EntityVectors,
    GraphProgress,
    LoadResponse,
    TextLoadRequest,
)
from .prompt import (
    PROMPT_CONFIG_TYPE,
    PromptRequest,
    PromptResponse,
    PromptTemplate,
    prompt_config,
    template_key,
)
from .queries import (
    DocumentEmbeddingsRequest,
    DocumentEmbeddingsResponse,
    Evidence,
    GraphEdge,
    GraphEdgesRequest,
    GraphEdgesResponse,
    GraphEmbeddingsRequest,
    GraphEmbeddingsResponse,
    GraphVersionRequest,
    GraphVersionResponse,
    LexicalSearchRequest,
    ReembedRequest,
    ReembedResponse,
    ScoredChunk,
    ScoredEntity,
    SubgraphRequest,
    SubgraphResponse,
    TriplesQueryRequest,
    TriplesQueryResponse,
)
from .record import Error, Record, Response, decode, encode
from .retrieval import (
    DocumentRagRequest,
    DocumentRagResponse,
    GraphRagRequest,
    GraphRagResponse,
    RagResponse,
    Source,
)
from .text_completion import Sampling, TextCompletionRequest, TextCompletionResponse
from .topics import CANCEL_TOPIC, flow_topic, request_topic, response_topic
from .usage import Usage

__all__ = [
    "AgentRequest", "AgentResponse", "AgentStep", "ApiKey", "CANCEL_TOPIC", "COLLECTIONS_FLOW",
    "COLLECTION_OWNERS", "CONFIG_FLOW", "CONFIG_NOTIFY_TOPIC", "CORE_SERVICES", "Cancel",
    "Chunk", "ChunkCountRequest", "ChunkCountResponse", "ChunkEntities", "ChunkSet",
    "ChunkTriples", "ChunkVector", "CollectionDeleteRequest", "CollectionDeleteResponse",
    "CollectionInfo", "CollectionManagementRequest", "CollectionManagementResponse",
    "CollectionMetadata", "CommunityCacheState", "ConfigKey", "ConfigNotify", "ConfigRequest",
    "ConfigResponse", "ConfigValue", "CoreChunk", "CoreDocument", "CoreEntity",
    "CoreRequest", "CoreResponse", "CoreTriple", "DecodeWork", "DocumentEmbeddingsRequest",
    "DocumentEmbeddingsResponse", "DocumentLoadRequest", "DocumentMetadata",
    "DocumentRagRequest", "DocumentRagResponse", "DocumentRef", "DocumentRemoved",
    "DocumentStatus", "EmbeddingsRequest", "EmbeddingsResponse", "EntityContext",
    "EntityVector", "EntityVectors", "Error", "Evidence", "FLOW_SERVICE_FLOW", "FlowRequest",
    "FlowResponse", "GraphEdge", "GraphEdgesRequest",
    "GraphEdgesResponse", "GraphEmbeddingsRequest", "GraphEmbeddingsResponse",
    "GraphProgress", "GraphRagRequest", "GraphRagResponse", "GraphVersionRequest",
    "GraphVersionResponse",
    "KEYS_CHANGED", "KEYS_FLOW", "KeyLimits", "KeyUse", "KeyVerifier", "KeysRequest",
    "KeysResponse", "KnowledgeLoadRequest", "KnowledgeLoadResponse", "LIBRARIAN_FLOW",
    "LazyCommunity", "LazyEntity", "LazyRagExpandRequest", "LazyRagExpandResponse",
    "LazyRagRequest", "LazyRagResponse", "LazyRagStatusRequest", "LazyRagStatusResponse",
    "LazyRelationship", "LexicalSearchRequest", "LibrarianRequest", "LibrarianResponse",
    "LoadResponse", "LoadStatusRequest", "LoadStatusResponse", "PROMPT_CONFIG_TYPE",
    "ProcessingMetadata", "PromptRequest", "PromptResponse", "PromptTemplate", "RDFS_LABEL",
    "ROLES", "RagResponse", "Record", "ReembedRequest", "ReembedResponse", "Response",
    "Role", "Sampling", "ScoredChunk", "ScoredEntity", "Source", "SubgraphRequest",
    "SubgraphResponse", "Term", "TextCompletionRequest", "TextCompletionResponse",
    "TextLoadRequest", "Triple", "TriplesQueryRequest", "TriplesQueryResponse", "Usage",
    "UserInfo", "decode", "encode", "flow_topic", "prompt_config", "request_topic",
    "response_topic", "template_key",
]
