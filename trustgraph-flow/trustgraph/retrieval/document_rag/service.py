"""Processor ``document-rag`` (docs/retrieval.md): the chunks nearest the question
(and its rewrite and sub-questions) in the user's collection, answered from with
``document-prompt``.

Sources are the chunks in the order the prompt numbers them, so an answer's "[2]"
is the second source: chunk id, document id, title, text and cosine distance.
"""
from typing import Any

from trustgraph.base import Clients, ProcessorSettings, ProcessorSpec
from trustgraph.schema import DocumentRagRequest, ScoredChunk, Source

from ..answer import Found, rag_service
from ..search import merge_rankings, search_vectors

NAME = "document-rag"
ERROR = f"{NAME}-error"
TEMPLATE = "document-prompt"


async def retrieve_chunks(request: DocumentRagRequest, searches: list[str],
                          clients: Clients) -> Found:
    """At most ``doc-limit`` chunks, each search contributing its nearest."""
    found = await search_vectors(clients, searches, "document-embeddings", request,
                                 request.doc_limit, ERROR)
    chunks = merge_rankings([answer.chunks or [] for answer in found],
                            key=lambda chunk: chunk.chunk_id,
                            score=lambda chunk: chunk.score, limit=request.doc_limit)
    return Found(sources=[source(chunk) for chunk in chunks], template=TEMPLATE,
                 variables=document_variables(request.query,
                                              [chunk.text for chunk in chunks]))


def document_variables(query: str, documents: list[str]) -> dict[str, Any]:
    """The variables of ``document-prompt``."""
    return {"query": query, "documents": documents}


def source(chunk: ScoredChunk) -> Source:
    return Source(id=chunk.chunk_id, document_id=chunk.document_id, title=chunk.title,
                  text=chunk.text, distance=1.0 - chunk.score)


SPEC = ProcessorSpec(NAME, ProcessorSettings,
                     lambda runtime: [rag_service(NAME, ERROR, DocumentRagRequest,
                                                   retrieve_chunks)],
                     uses=("prompt", "embeddings", "document-embeddings"))
