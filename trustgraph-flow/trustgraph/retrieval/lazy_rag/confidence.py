"""How much of the question the subgraph covers (docs/lazy-rag.md, "Confidence").

For each key term ``t`` of the question (``phrases.key_terms``), its match strength:

    m(t) = 1                      t names an entity of the subgraph exactly
    m(t) = covered words / words  otherwise: its content words found among the
                                  words of the subgraph's labels and statements

    C = Σ w(t)·m(t) / Σ w(t)      coverage, w(t) = the number of words of t
                                  (0.5 when the question has no content words)
    S = mean of the best three seed strengths (1 for an exact label match, the
        cosine similarity of a vector match), clipped to [0, 1]

    confidence = C · (0.6 + 0.4·S)      and 0 when the subgraph has no entity

So an empty graph gives 0, a question whose every term names an entity of the
subgraph gives 1, and weak vector matches alone can never give more than 0.4·C
above the coverage floor. A term with m(t) < 0.5 is missing; so is a sub-question
none of whose terms is covered, reported in place of its terms.
"""
from collections.abc import Iterable
from dataclasses import dataclass

from .phrases import KeyTerm, is_content, sub_questions, words

COVERED = 0.5  # a term matched at least this well is not missing
SEEDS_WEIGHED = 3
NO_TERMS_COVERAGE = 0.5


@dataclass(frozen=True)
class Coverage:
    confidence: float
    missing_info: list[str]


class Vocabulary:
    """The words of the subgraph, for matching a term's words against."""

    def __init__(self, texts: Iterable[str]) -> None:
        self._words = {w.casefold() for text in texts for w in words(text)}
        self._stems = {w[:5] for w in self._words if len(w) >= 5}

    def has(self, word: str) -> bool:
        word = word.casefold()
        # ``phrases.same_word``'s rule, indexed: equal, or the same five-letter stem.
        return word in self._words or (len(word) >= 5 and word[:5] in self._stems)


def strength(term: KeyTerm, vocabulary: Vocabulary) -> float:
    if term.matched:
        return 1.0
    content = [w for w in words(term.text) if is_content(w)]
    if not content:
        return 0.0
    return sum(vocabulary.has(w) for w in content) / len(content)


def _weight(term: KeyTerm) -> int:
    return max(1, sum(is_content(w) for w in words(term.text)))


def estimate(question: str, terms: list[KeyTerm], vocabulary: Vocabulary,
             seed_strengths: list[float], has_entities: bool) -> Coverage:
    strengths = {term: strength(term, vocabulary) for term in terms}
    missing = _missing(question, strengths)
    if not has_entities:
        return Coverage(0.0, missing)
    total = sum(_weight(t) for t in terms)
    coverage = (sum(_weight(t) * m for t, m in strengths.items()) / total if total
                else NO_TERMS_COVERAGE)
    best = sorted((min(1.0, max(0.0, s)) for s in seed_strengths), reverse=True)
    seeds = sum(best[:SEEDS_WEIGHED]) / len(best[:SEEDS_WEIGHED]) if best else 0.0
    return Coverage(round(coverage * (0.6 + 0.4 * seeds), 3), missing)


def _missing(question: str, strengths: dict[KeyTerm, float]) -> list[str]:
    """Uncovered sub-questions (when there are several), then the uncovered terms
    not inside one of them."""
    uncovered = [t.text for t, m in strengths.items() if m < COVERED]
    parts = sub_questions(question)
    missing = []
    if len(parts) > 1:
        for part in parts:
            inside = [t for t in strengths if t.text in part]
            if inside and all(strengths[t] < COVERED for t in inside):
                missing.append(part if part.endswith("?") else f"{part}?")
    listed = " ".join(missing)
    return missing + [text for text in uncovered if text not in listed]
