"""Chunking: a document's text into chunks the embedding model reads whole."""
from .document import DocumentChunk, chunk_document
from .splitter import DEFAULT_MAX_TOKENS, DEFAULT_OVERLAP, MODEL_LIMIT, TextChunk, split_text
from .tokens import ModelTokens, TokenCounter, WordTokens

__all__ = ["DEFAULT_MAX_TOKENS", "DEFAULT_OVERLAP", "DocumentChunk", "MODEL_LIMIT",
           "ModelTokens", "TextChunk", "TokenCounter", "WordTokens", "chunk_document",
           "split_text"]
