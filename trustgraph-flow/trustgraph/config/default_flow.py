"""The default blueprint (today's default stack, as ``tg-start`` runs it), the
parameter types its parameters are of, and the interface descriptions
``tg-show-flows`` reads: written into config by the flow service on a fresh data
dir, with flow ``default`` started from the blueprint (``flow_service.seed``).

A parameter with no default leaves the processor's own setting in force (its
environment variable, named in the description): a flow sets only what it says.
"""
from typing import Any

from trustgraph.run.registry import DEFAULT_STACK, GATEWAY, members
from trustgraph.schema.flows import (
    Blueprint,
    BlueprintParameter,
    InterfaceDescription,
    ParameterType,
)
from trustgraph.schema.lazy_rag import MAX_LAZY_ENTITIES, MAX_LAZY_HOPS

# model/text_completion/<name>/ (a unit test holds the two the same)
PROVIDERS = ("anthropic", "azure", "bedrock", "cohere", "googleaistudio", "llamafile",
             "lmstudio", "local", "mistral", "ollama", "openai", "tgi", "vertexai",
             "vertexai_claude", "vllm")
EXTRACTORS = ("nounphrase", "keyphrase", "llm")  # extract/service.py's (held the same)


def _type(type: str, description: str, **constraints: Any) -> ParameterType:
    return ParameterType.model_validate({"type": type, "description": description,
                                         **constraints})


PARAMETER_TYPES: dict[str, ParameterType] = {
    "llm-provider": _type("string", "which LLM provider answers (unset: TG_LLM); its "
                          "key comes from the processor's environment",
                          enum=list(PROVIDERS)),
    "llm-model": _type("string", "the model the provider answers with (unset: "
                       "TG_LLM_MODEL, or the provider's own)"),
    "llm-base-url": _type("string", "where the provider is (unset: its variable, e.g. "
                          "OPENAI_BASE_URL)"),
    "temperature": _type("number", "sampling temperature (unset: TG_LLM_TEMPERATURE)",
                         minimum=0, maximum=2),
    "max-tokens": _type("integer", "tokens an answer may take (unset: TG_LLM_MAX_TOKENS)",
                        minimum=1),
    "chunk-size": _type("integer", "tokens per chunk at most (unset: TG_CHUNK_SIZE)",
                        minimum=16, maximum=8192),
    "chunk-overlap": _type("integer", "tokens a chunk repeats from the one before, at "
                           "most half the chunk size (unset: TG_CHUNK_OVERLAP)",
                           minimum=0, maximum=4096),
    "extractor": _type("string", "how knowledge is extracted from chunks (unset: "
                       "TG_EXTRACTOR)", enum=[
                           {"id": "nounphrase", "description": "noun phrases, no LLM"},
                           {"id": "keyphrase", "description": "YAKE key phrases, no LLM"},
                           {"id": "llm", "description": "definitions and relationships "
                                                        "by the LLM"}]),
    "retrieval-mode": _type("string", "the service /api/v1/query, the OpenAI API and "
                            "MCP's ask use when the request names none", default="document",
                            enum=["document", "graph", "lazy"]),
    "doc-limit": _type("integer", "chunks document-rag answers from", minimum=1,
                       maximum=500),
    "entity-limit": _type("integer", "entities graph-rag seeds from", minimum=1,
                          maximum=1000),
    "triple-limit": _type("integer", "triples graph-rag follows per entity per hop",
                          minimum=1, maximum=1000),
    "max-path-length": _type("integer", "hops graph-rag expands the graph", minimum=1,
                             maximum=5),
    "max-subgraph-size": _type("integer", "triples graph-rag answers from at most",
                               minimum=1, maximum=5000),
    "retrieval": _type("string", "how chunks are found (unset: TG_RETRIEVAL)",
                       enum=["vector", "lexical", "hybrid"]),
    "rerank": _type("boolean", "reorder the chunks found through the LLM before "
                    "answering (document-rag)"),
    "lazy-rag-max-entities": _type("integer", "entities a LazyRAG answer reads at most "
                                   "(unset: LAZY_RAG_MAX_ENTITIES)", minimum=1,
                                   maximum=MAX_LAZY_ENTITIES),
    "lazy-rag-max-hops": _type("integer", "hops LazyRAG expands at most (unset: "
                               "LAZY_RAG_MAX_HOPS)", minimum=1, maximum=MAX_LAZY_HOPS),
    "lazy-rag-use-communities": _type("boolean", "LazyRAG reads communities (unset: "
                                      "LAZY_RAG_USE_COMMUNITIES)"),
}

# The services a client asks on a flow of this blueprint, as tg-show-flows lists them.
INTERFACES: dict[str, str] = {
    "text-completion": "the LLM",
    "prompt": "prompt templates, answered by the LLM",
    "graph-rag": "questions answered from the knowledge graph",
    "document-rag": "questions answered from document chunks",
    "lazy-rag": "questions answered from the graph, summarised at query time",
    "agent": "the agent, with its tools",
    "embeddings": "text embeddings",
    "triples": "triple queries",
    "graph-embeddings": "entity vector search",
    "document-embeddings": "chunk vector search",
    "text-load": "text loaded for processing",
    "document-load": "documents loaded for processing",
    "load-status": "how far loading has come",
}

# Listed in this order by tg-show-flow-blueprints and tg-show-flows.
PARAMETERS = list(PARAMETER_TYPES)

# Global services only: they run whichever flows do.
OUTSIDE_FLOWS = ("config", GATEWAY)


def processors() -> list[str]:
    """The processors of tg-start's default stack (each group's members)."""
    return [name for entry in DEFAULT_STACK for name in members(entry)
            if name not in OUTSIDE_FLOWS]


def default_blueprint() -> Blueprint:
    return Blueprint(
        description="everything from loading documents to answering questions about them: "
                    "tg-start's default stack",
        tags=["default"], processors=processors(), interfaces=list(INTERFACES),
        parameters={name: BlueprintParameter(type=name, order=order,
                                             description=PARAMETER_TYPES[name].description)
                    for order, name in enumerate(PARAMETERS, 1)})


def interface_descriptions() -> dict[str, InterfaceDescription]:
    return {name: InterfaceDescription(description=text) for name, text in INTERFACES.items()}

