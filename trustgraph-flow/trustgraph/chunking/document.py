"""Chunks of a decoded document, each with the page and section it starts in."""
from dataclasses import dataclass

from trustgraph.decoding import Decoded

from .context import embedded_text
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


def chunk_document(document: Decoded, counter: TokenCounter,
                   max_tokens: int = DEFAULT_MAX_TOKENS, overlap: int = DEFAULT_OVERLAP,
                   title: str = "", window: int | None = None) -> list[DocumentChunk]:
    """``window``: the tokens the embedding model reads (``MODEL_LIMIT`` for
    all-MiniLM-L6-v2). Chunks are then cut small enough for the longest context any
    of them is embedded under (``title`` and heading path, context.py) to fit beside
    them, so the model still reads every word of the chunk."""
    if window is not None:
        room = window - context_tokens(document, title, counter)
        max_tokens = min(max_tokens, max(room, window // 2, 2 * overlap))
    chunks = []
    for chunk in split_text(document.text, counter, max_tokens, overlap):
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


def context_tokens(document: Decoded, title: str, counter: TokenCounter) -> int:
    """The tokens of the longest context (title, heading path and the blank line
    after them) that a chunk of ``document`` is embedded under."""
    paths = {section.headings for section in document.sections} or {()}
    return max(len(counter.token_starts(embedded_text("", list(path), title)))
               for path in paths)
