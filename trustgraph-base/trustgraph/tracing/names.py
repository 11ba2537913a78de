"""The attribute names spans carry, written once: TrustGraph's own (``tg.*``),
OpenTelemetry's GenAI semantic conventions (``gen_ai.*``, on LLM spans) and the
OpenInference attributes Arize Phoenix reads (``openinference.span.kind``,
``llm.*``, ``input.value`` ...), so any OTLP backend shows a question's model,
tokens and timings under the names it knows."""

# -- TrustGraph's own ------------------------------------------------------------------
PROCESS = "tg.process"  # the process a span was made in (tg-start's name for it)
SERVICE = "tg.service"
STAGE = "tg.stage"
FLOW = "tg.flow"
REQUEST_ID = "tg.request_id"  # the ``id=`` of the log lines
USER = "tg.user"
COLLECTION = "tg.collection"
DOCUMENT = "tg.document"
TRANSPORT = "tg.transport"  # websocket, or the HTTP route
CLIENT_SPAN = "tg.client_span"  # the client's span a request's span continues
DELIVERY = "tg.delivery"  # a stage record's delivery (1: the first)
# Milliseconds from the span's start (a service: from taking the request).
FIRST_RESPONSE_MS = "tg.time_to_first_response_ms"
FIRST_TOKEN_MS = "tg.time_to_first_token_ms"
SOURCES_MS = "tg.time_to_sources_ms"
SLOT_WAIT_MS = "tg.slot_wait_ms"  # waited for a TG_CONCURRENCY slot
CANCELLED = "tg.cancelled"
EXPLAIN = "tg.explain"  # a RAG answer's retrieval explanation (JSON; explain.py)
PROMPT_TEMPLATE = "tg.prompt.template"
PROMPT_CHARS = "tg.prompt.chars"  # the rendered prompt's size
TEXTS = "tg.texts"  # texts embedded in one request

# -- OpenTelemetry ---------------------------------------------------------------------
ERROR_TYPE = "error.type"
HTTP_METHOD = "http.request.method"
HTTP_ROUTE = "http.route"
HTTP_STATUS = "http.response.status_code"
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_PROVIDER = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"

# -- OpenInference (Arize Phoenix) -----------------------------------------------------
SPAN_KIND = "openinference.span.kind"
INPUT = "input.value"
OUTPUT = "output.value"
LLM_MODEL = "llm.model_name"
LLM_PROVIDER = "llm.provider"
LLM_PROMPT_TOKENS = "llm.token_count.prompt"
LLM_COMPLETION_TOKENS = "llm.token_count.completion"
LLM_TOTAL_TOKENS = "llm.token_count.total"
EMBEDDING_MODEL = "embedding.model_name"

# What each service's span is, as OpenInference names kinds; any other is a CHAIN.
KINDS = {
    "text-completion": "LLM",
    "embeddings": "EMBEDDING",
    "document-embeddings": "RETRIEVER",
    "graph-embeddings": "RETRIEVER",
    "lexical-search": "RETRIEVER",
    "triples": "RETRIEVER",
    "subgraph": "RETRIEVER",
    "agent": "AGENT",
}
CHAIN = "CHAIN"

# Text kept on a span (a prompt, a question): enough to recognise it, never a whole
# document, so a span stays small in the store and in any backend.
MAX_TEXT = 2000


def bounded(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} chars)"
