"""Counting tokens the way the embedding model will.

The chunker is given a counter: ``ModelTokens`` over the embedding model's own
tokenizer (its provider supplies the tokenizer), or ``WordTokens`` when there is none.
A counter tokenizes a whole document once and gives the character offset at
which each token starts; the token count of any span of the text is then the
number of starts inside it (two binary searches), with no re-tokenizing. For a
BERT-style tokenizer (all-MiniLM-L6-v2's) this equals tokenizing the span
itself whenever the span starts and ends at whitespace, which is where the
splitter cuts.
"""
import bisect
import re
from typing import Protocol

from tokenizers import Tokenizer


class TokenCounter(Protocol):
    def token_starts(self, text: str) -> list[int]:
        """Character offset of each token of ``text``, ascending (no special tokens)."""
        ...


class ModelTokens:
    """Any ``tokenizers.Tokenizer``; special tokens are not counted."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    def token_starts(self, text: str) -> list[int]:
        return [start for start, _ in
                self.tokenizer.encode(text, add_special_tokens=False).offsets]


class WordTokens:
    """An approximation for when no tokenizer is at hand: words and punctuation."""

    _TOKEN = re.compile(r"\w+|[^\w\s]")

    def token_starts(self, text: str) -> list[int]:
        return [m.start() for m in self._TOKEN.finditer(text)]


class Counts:
    """Token counts of spans of one text."""

    def __init__(self, text: str, counter: TokenCounter) -> None:
        self.starts = counter.token_starts(text)

    def between(self, start: int, end: int) -> int:
        return bisect.bisect_left(self.starts, end) - bisect.bisect_left(self.starts, start)

    def first_at_or_after(self, offset: int) -> int:
        """Index of the first token starting at or after ``offset``."""
        return bisect.bisect_left(self.starts, offset)
