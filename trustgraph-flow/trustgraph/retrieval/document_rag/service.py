"""Processor ``document-rag`` (docs/retrieval.md): the chunks that best match the
question (and its rewrite and sub-questions) in the user's collection — nearest
vectors, best BM25 word matches, or both fused (``retrieval``, default
``TG_RETRIEVAL``, itself default ``hybrid``) — answered from with ``document-prompt``.

Sources are the chunks in the order the prompt numbers them, so an answer's "[2]"
is the second source: chunk id, document id, title, text, cosine distance (when the
vector search found it) and the citation details the chunk was stored with.
"""
from typing import Any

from trustgraph.base import Clients, ProcessorSpec, Runtime
from trustgraph.schema import DocumentRagRequest, ScoredChunk, Source

from ..answer import Found, rag_service
from ..search import FoundChunk, Fusion, RetrievalSettings, search_chunks

NAME = "document-rag"
ERROR = f"{NAME}-error"
TEMPLATE = "document-prompt"


def chunk_retriever(fusion: Fusion):
    async def retrieve_chunks(request: DocumentRagRequest, searches: list[str],
                              clients: Clients) -> Found:
        """At most ``doc-limit`` chunks, each search contributing its best."""
        found = await search_chunks(clients, searches, request, request.doc_limit, ERROR,
                                    fusion, request.retrieval)
        return Found(sources=[cited(f) for f in found], template=TEMPLATE,
                     variables=document_variables(request.query,
                                                  [f.chunk.text for f in found]))
    return retrieve_chunks


# Vector retrieval with the old signature, for callers outside this service (the agent).
retrieve_chunks = chunk_retriever(Fusion(mode="vector"))


def document_variables(query: str, documents: list[str]) -> dict[str, Any]:
    """The variables of ``document-prompt``."""
    return {"query": query, "documents": documents}


def source(chunk: ScoredChunk) -> Source:
    return Source(id=chunk.chunk_id, document_id=chunk.document_id, title=chunk.title,
                  text=chunk.text, distance=1.0 - chunk.score)


def cited(found: FoundChunk) -> Source:
    """The chunk as a source a reader can check: where it is, and what each
    retriever that found it scored."""
    chunk, scores = found.chunk, found.scores
    vector = scores.get("vector")
    return Source(id=chunk.chunk_id, document_id=chunk.document_id, title=chunk.title,
                  text=chunk.text, distance=None if vector is None else 1.0 - vector,
                  author=chunk.author, order=chunk.order, page_range=chunk.page_range,
                  header_titles=chunk.header_titles, char_range=chunk.char_range,
                  scores=scores)


def services(runtime: Runtime):
    # Tests build the service without a runtime (and so without retrieval settings).
    fusion = Fusion.of(getattr(runtime, "settings", None))
    return [rag_service(NAME, ERROR, DocumentRagRequest, chunk_retriever(fusion))]


SPEC = ProcessorSpec(NAME, RetrievalSettings, services,
                     uses=("prompt", "embeddings", "document-embeddings", "lexical-search"))
