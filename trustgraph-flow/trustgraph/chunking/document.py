"""Chunks of a decoded document, each with the page and section it starts in."""
from dataclasses import dataclass

from trustgraph.decoding import Decoded

from .splitter import DEFAULT_MAX_TOKENS, DEFAULT_OVERLAP, split_text
from .tokens import TokenCounter


@dataclass(frozen=True)
class DocumentChunk:
    index: int
    start: int
    end: int
    text: str
    tokens: int
    page: int | None = None
    section: str = ""
    page_end: int | None = None  # the page of its last character
    headings: tuple[str, ...] = ()  # the section's heading path, heading by heading


def chunk_document(document: Decoded, max_tokens: int = DEFAULT_MAX_TOKENS,
                   overlap: int = DEFAULT_OVERLAP,
                   counter: TokenCounter | None = None) -> list[DocumentChunk]:
    chunks = []
    for chunk in split_text(document.text, max_tokens, overlap, counter):
        # The section of the chunk's first new character: an overlapping start may
        # lie in the section before.
        section = document.section_at(chunk.start)
        last = document.section_at(max(chunk.start, chunk.end - 1))
        page = section.page if section else None
        chunks.append(DocumentChunk(
            chunk.index, chunk.start, chunk.end, chunk.text, chunk.tokens, page,
            section.title if section else "", last.page if last and last.page else page,
            section.headings if section else ()))
    return chunks
