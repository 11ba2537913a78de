"""Every record on the bus and the gateway wire (PROTOCOL §4), and topic names."""
from .cancel import Cancel
from .config import (
                     CONFIG_FLOW,
                     CONFIG_NOTIFY_TOPIC,
                     ConfigKey,
                     ConfigNotify,
                     ConfigRequest,
                     ConfigResponse,
                     ConfigValue,
)
from .embeddings import EmbeddingsRequest, EmbeddingsResponse
from .knowledge import RDFS_LABEL, Term, Triple
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
                     LoadResponse,
                     TextLoadRequest,
)
from .prompt import PROMPT_CONFIG_TYPE, PromptRequest, PromptResponse, PromptTemplate
from .record import Error, Record, Response, decode, encode
from .text_completion import Sampling, TextCompletionRequest, TextCompletionResponse
from .topics import CANCEL_TOPIC, flow_topic, request_topic, response_topic
from .usage import Usage

__all__ = [
    "CANCEL_TOPIC", "CONFIG_FLOW", "CONFIG_NOTIFY_TOPIC", "Cancel", "Chunk", "ChunkEntities",
    "ChunkTriples", "ChunkVector", "ConfigKey", "ConfigNotify", "ConfigRequest",
    "ConfigResponse", "ConfigValue", "DecodeWork", "DocumentLoadRequest", "DocumentRef",
    "DocumentRemoved", "EmbeddingsRequest", "EmbeddingsResponse", "EntityContext",
    "EntityVector", "EntityVectors", "Error", "LoadResponse", "PROMPT_CONFIG_TYPE",
    "PromptRequest", "PromptResponse", "PromptTemplate", "RDFS_LABEL", "Record", "Response",
    "Sampling",
    "TextCompletionRequest", "TextCompletionResponse", "TextLoadRequest", "Term", "Triple",
    "Usage",
    "decode", "encode", "flow_topic", "request_topic", "response_topic",
]

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

__all__ += [
    "DocumentEmbeddingsRequest", "DocumentEmbeddingsResponse", "Evidence", "GraphEdge",
    "GraphEdgesRequest", "GraphEdgesResponse", "GraphVersionRequest", "GraphVersionResponse",
    "GraphEmbeddingsRequest", "GraphEmbeddingsResponse", "LexicalSearchRequest",
    "ReembedRequest", "ReembedResponse", "ScoredChunk", "ScoredEntity",
    "SubgraphRequest", "SubgraphResponse", "TriplesQueryRequest", "TriplesQueryResponse",
]

from .librarian import (  # noqa: E402
                     LIBRARIAN_FLOW,
                     CollectionInfo,
                     DocumentMetadata,
                     LibrarianRequest,
                     LibrarianResponse,
                     ProcessingMetadata,
)

__all__ += ["LIBRARIAN_FLOW", "CollectionInfo", "DocumentMetadata", "LibrarianRequest",
            "LibrarianResponse", "ProcessingMetadata"]

from .knowledge_load import KnowledgeLoadRequest, KnowledgeLoadResponse  # noqa: E402

__all__ += ["KnowledgeLoadRequest", "KnowledgeLoadResponse"]

from .retrieval import (  # noqa: E402
                     DocumentRagRequest,
                     DocumentRagResponse,
                     GraphRagRequest,
                     GraphRagResponse,
                     RagResponse,
                     Source,
)

__all__ += ["DocumentRagRequest", "DocumentRagResponse", "GraphRagRequest",
            "GraphRagResponse", "RagResponse", "Source"]

from .load_status import (  # noqa: E402
                     ChunkCountRequest,
                     ChunkCountResponse,
                     ChunkSet,
                     DocumentStatus,
                     LoadStatusRequest,
                     LoadStatusResponse,
)

__all__ += ["ChunkCountRequest", "ChunkCountResponse", "ChunkSet", "DocumentStatus",
            "LoadStatusRequest", "LoadStatusResponse"]

from .agent import AgentRequest, AgentResponse, AgentStep  # noqa: E402

__all__ += ["AgentRequest", "AgentResponse", "AgentStep"]

from .lazy_rag import (  # noqa: E402
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

__all__ += ["CommunityCacheState", "LazyCommunity", "LazyEntity", "LazyRagExpandRequest",
            "LazyRagExpandResponse", "LazyRagRequest", "LazyRagResponse",
            "LazyRagStatusRequest", "LazyRagStatusResponse", "LazyRelationship"]

from .cores import (  # noqa: E402
                     CORE_SERVICES,
                     CoreChunk,
                     CoreDocument,
                     CoreEntity,
                     CoreRequest,
                     CoreResponse,
                     CoreTriple,
)

__all__ += ["CORE_SERVICES", "CoreChunk", "CoreDocument", "CoreEntity", "CoreRequest",
            "CoreResponse", "CoreTriple"]

from .keys import (  # noqa: E402
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

__all__ += ["KEYS_CHANGED", "KEYS_FLOW", "ROLES", "ApiKey", "KeyLimits", "KeyUse",
            "KeyVerifier", "KeysRequest", "KeysResponse", "Role", "UserInfo"]
