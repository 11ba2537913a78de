"""Processor ``document-rag`` (docs/retrieval.md): the chunks that best match the
question (and its rewrite and sub-questions) in the user's collection — nearest
vectors, best BM25 word matches, or both fused (``retrieval``, default
``TG_RETRIEVAL``, itself default ``hybrid``) — answered from with ``document-prompt``.

Sources are the chunks in the order the prompt numbers them, so an answer's "[2]"
is the second source: chunk id, document id, title, text, cosine distance (when the
vector search found it) and the citation details the chunk was stored with. With
``rerank``, the fused chunks are reordered through the LLM first (rerank.py).
"""
from typing import Any

from trustgraph.base import Clients, ProcessorSpec, PromptClient, Runtime
from trustgraph.schema import DocumentRagRequest, ScoredChunk, Source, Usage

from .. import explain
from ..answer import Found, rag_service
from ..rerank import Reranking, RerankSettings, rerank
from ..search import FoundChunk, Fusion, RetrievalSettings, search_chunks

NAME = "document-rag"
ERROR = f"{NAME}-error"
TEMPLATE = "document-prompt"


class DocumentRagSettings(RetrievalSettings, RerankSettings):
    pass


def chunk_retriever(fusion: Fusion, reranking: Reranking | None = None):
    reranking = reranking or Reranking()

    async def retrieve_chunks(request: DocumentRagRequest, searches: list[str],
                              clients: Clients) -> Found:
        """At most ``doc-limit`` chunks, each search contributing its best."""
        limit = request.doc_limit
        if request.rerank:
            limit = max(limit, reranking.candidates)
        found = await search_chunks(clients, searches, request, limit, ERROR,
                                    fusion, request.retrieval)
        usage = Usage()
        if request.rerank:
            found, usage = await reranked(clients, request.query, found, reranking)
        explained(found, request.doc_limit)
        found = found[:request.doc_limit]
        return Found(sources=[cited(f) for f in found], template=TEMPLATE,
                     variables=document_variables(request.query,
                                                  [f.chunk.text for f in found]),
                     usage=usage)
    return retrieve_chunks


async def reranked(clients: Clients, query: str, found: list[FoundChunk],
                   reranking: Reranking) -> tuple[list[FoundChunk], Usage]:
    """The first ``candidates`` chunks in the reranker's order (each scored with its
    new place, ``rerank``), then the rest; and what the reranking prompt cost."""
    head = found[:reranking.candidates]
    result = await rerank(PromptClient(await clients.get("prompt")), query,
                          [(f.chunk.title, f.chunk.text) for f in head], reranking)
    if not result.applied:
        return found, result.usage
    ordered = [head[i] for i in result.order]
    for place, chunk in enumerate(ordered, 1):
        chunk.scores["rerank"] = place
    return ordered + found[len(head):], result.usage


def explained(found: list[FoundChunk], limit: int) -> None:
    """The chunks this answer's retrieval considered, best first, with what each
    retriever (and the reranker) scored them; the first ``limit`` kept."""
    explanation = explain.current()
    if explanation is not None:
        explanation.consider(explain.Candidate(
            "chunk", f.chunk.chunk_id, f.chunk.text, f.scores, n < limit, f.chunk.document_id)
            for n, f in enumerate(found))


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
    settings = getattr(runtime, "settings", None)
    return [rag_service(NAME, ERROR, DocumentRagRequest,
                        chunk_retriever(Fusion.of(settings), Reranking.of(settings)))]


SPEC = ProcessorSpec(NAME, DocumentRagSettings, services,
                     uses=("prompt", "embeddings", "document-embeddings", "lexical-search"))
