"""The recursive splitter: text in, chunks of at most ``max_tokens`` tokens out.

A span too long for one chunk is cut at paragraph breaks; a paragraph still too
long, at sentence ends; then at line breaks; then between words; a single
"word" longer than a chunk (a URL, a run of symbols) at token boundaries. The
pieces are then packed greedily, in order, into chunks of at most
``max_tokens - overlap`` tokens, and every chunk after the first is extended
backwards to the start of a word so that it repeats at most ``overlap`` tokens of
the text before it. So every chunk has at most ``max_tokens`` tokens, and the
chunks, in order, cover every character of the text that is not white space.

A chunk's ``text`` is exactly ``text[start:end]`` of the input.
"""
import re
from dataclasses import dataclass
from itertools import pairwise

from .tokens import Counts, TokenCounter

# all-MiniLM-L6-v2 reads 256 tokens, two of them [CLS] and [SEP]: chunks stay at
# or under 254 so the model sees every word of every chunk.
MODEL_LIMIT = 254
DEFAULT_MAX_TOKENS = 250
DEFAULT_OVERLAP = 30

_SEPARATORS = [
    re.compile(r"\n[ \t]*\n\s*"),  # paragraphs
    re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+"),  # sentences
    re.compile(r"\n\s*"),  # lines
    re.compile(r"\s+"),  # words
]


@dataclass(frozen=True)
class TextChunk:
    index: int
    start: int  # character offsets into the text; end exclusive
    end: int
    text: str
    tokens: int


def split_text(text: str, counter: TokenCounter, max_tokens: int = DEFAULT_MAX_TOKENS,
               overlap: int = DEFAULT_OVERLAP) -> list[TextChunk]:
    """Chunks of ``text``, each of at most ``max_tokens`` tokens as ``counter``
    counts them (the embedding model's tokenizer, for chunks it reads whole),
    consecutive chunks sharing up to ``overlap`` tokens."""
    if max_tokens < 1 or not 0 <= overlap <= max_tokens // 2:
        raise ValueError(f"need max_tokens >= 1 and 0 <= overlap <= max_tokens/2, "
                         f"got {max_tokens} and {overlap}")
    counts = Counts(text, counter)
    capacity = max_tokens - overlap
    pieces = _pieces(text, 0, len(text), 0, counts, capacity)
    spans = _pack(pieces, counts, capacity)
    chunks = []
    for i, (start, end) in enumerate(spans):
        if i and overlap:
            start = _overlap_start(text, counts, start, overlap, spans[i - 1][0])
        start, end = _trim(text, start, end)
        chunks.append(TextChunk(i, start, end, text[start:end], counts.between(start, end)))
    return chunks


def _pieces(text: str, start: int, end: int, level: int, counts: Counts,
            capacity: int) -> list[tuple[int, int]]:
    """Consecutive spans covering [start, end), each of at most ``capacity`` tokens."""
    if counts.between(start, end) <= capacity:
        return [(start, end)]
    if level == len(_SEPARATORS):
        return _token_cuts(text, start, end, counts, capacity)
    cuts = [m.end() for m in _SEPARATORS[level].finditer(text, start, end) if m.end() < end]
    bounds = [start, *cuts, end]
    spans = []
    for a, b in pairwise(bounds):
        if a < b:
            spans.extend(_pieces(text, a, b, level + 1, counts, capacity))
    return spans


def _token_cuts(text: str, start: int, end: int, counts: Counts,
                capacity: int) -> list[tuple[int, int]]:
    """Cuts between tokens, as late as ``capacity`` allows, preferring places where
    the tokenizer starts afresh, so each piece tokenizes alone as it was counted."""
    first, last = counts.first_at_or_after(start), counts.first_at_or_after(end)
    bounds, cut = [start], first
    while last - cut > capacity:
        target = cut + capacity
        clean = next((i for i in range(target, cut, -1)
                      if _starts_pretoken(text, counts.starts[i])), target)
        bounds.append(counts.starts[clean])
        cut = clean
    bounds.append(end)
    return list(pairwise(bounds))


def _pack(pieces: list[tuple[int, int]], counts: Counts,
          capacity: int) -> list[tuple[int, int]]:
    """Consecutive pieces joined while the total stays within ``capacity``; pieces
    with no tokens (white space) join whichever chunk they follow."""
    spans: list[tuple[int, int]] = []
    start: int | None = None
    end = tokens = 0
    for a, b in pieces:
        n = counts.between(a, b)
        if start is not None and tokens + n > capacity:
            spans.append((start, end))
            start, tokens = None, 0
        if start is None:
            start = a
        end, tokens = b, tokens + n
    if start is not None:
        spans.append((start, end))
    return [s for s in spans if counts.between(*s)]


def _overlap_start(text: str, counts: Counts, start: int, overlap: int,
                   previous_start: int) -> int:
    """Where a chunk that would start at ``start`` starts instead, to repeat at
    most ``overlap`` tokens of the text before it: the earliest word start in
    that window after the previous chunk's start; failing that (text without
    spaces), the earliest token that cannot be the tail of a word; else ``start``."""
    first = counts.first_at_or_after(start)
    window = [p for p in counts.starts[max(0, first - overlap):first] if p > previous_start]
    for acceptable in (_starts_word, _starts_pretoken):
        for position in window:
            if acceptable(text, position):
                return position
    return start


def _starts_word(text: str, position: int) -> bool:
    return text[position - 1].isspace()


def _starts_pretoken(text: str, position: int) -> bool:
    """True where a BERT-style tokenizer starts afresh: after punctuation, at
    punctuation, at a CJK character (never inside a run of letters)."""
    before, at = text[position - 1], text[position]
    return not (before.isalnum() and at.isalnum()) or _is_cjk(before) or _is_cjk(at)


def _is_cjk(char: str) -> bool:
    return "\u3040" <= char <= "\u9fff" or "\uac00" <= char <= "\ud7af" \
        or "\uf900" <= char <= "\ufaff" or "\U00020000" <= char <= "\U0002fa1f"


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
