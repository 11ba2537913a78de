"""The measures tg-eval reports, as plain functions of one question's outcome
(docs/evaluation.md defines each).

Ranking measures look at the documents the sources cite, each once, in the order
first cited: a document counts as expected when its id or its title is among the
question's ``expected``. Answer measures compare the answer with the reference as
SQuAD's evaluation does (lower case, no punctuation, no articles, single spaces),
the answer's source numbers ("[2]") left out.
"""
import math
import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DEPTH = 10  # the deepest rank the ranking measures look at


@dataclass(frozen=True)
class Cited:
    """A document as the sources cite it."""

    id: str
    title: str = ""

    def matches(self, expected: set[str]) -> bool:
        return self.id in expected or (bool(self.title) and self.title in expected)


def cited_documents(sources: Iterable[dict]) -> list[Cited]:
    """The documents ``sources`` cite, each once, in the order first cited."""
    found: dict[str, Cited] = {}
    for source in sources:
        document = source.get("document_id") or ""
        if document and document not in found:
            found[document] = Cited(document, source.get("title") or "")
    return list(found.values())


def relevant_ranks(documents: Sequence[Cited], expected: set[str]) -> list[int]:
    """The ranks (from 1) of the expected documents among the first ``DEPTH``."""
    return [rank for rank, document in enumerate(documents[:DEPTH], 1)
            if document.matches(expected)]


def recall_at(ranks: Sequence[int], expected: int, k: int) -> float:
    """The share of the expected documents found in the first ``k``."""
    return min(1.0, sum(1 for r in ranks if r <= k) / expected) if expected else 0.0


def reciprocal_rank(ranks: Sequence[int]) -> float:
    """1 / the rank of the first expected document (0 when none is in the first 10)."""
    return 1 / min(ranks) if ranks else 0.0


def ndcg_at(ranks: Sequence[int], expected: int, k: int = DEPTH) -> float:
    """Normalised discounted cumulative gain with binary relevance."""
    gain = sum(1 / math.log2(r + 1) for r in ranks if r <= k)
    ideal = sum(1 / math.log2(r + 1) for r in range(1, min(expected, k) + 1))
    return gain / ideal if ideal else 0.0


_CITATION = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")


def answer_citations(answer: str, sources: Sequence[dict]) -> list[Cited]:
    """The documents the answer cites by source number ("[2]", "[1, 3]"), each once."""
    numbers = [int(n) for group in _CITATION.findall(answer) for n in group.split(",")]
    picked = [sources[n - 1] for n in numbers if 1 <= n <= len(sources)]
    return cited_documents(picked)


def cited_precision(answer: str, sources: Sequence[dict], expected: set[str]
                    ) -> float | None:
    """The share of the documents the answer cites that are expected; None when it
    cites none."""
    cited = answer_citations(answer, sources)
    return sum(1 for d in cited if d.matches(expected)) / len(cited) if cited else None


def normalised(text: str) -> str:
    """SQuAD's normalisation, after dropping source numbers ("[2]")."""
    text = _CITATION.sub(" ", text)
    text = "".join(c for c in text.lower() if c not in string.punctuation)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(answer: str, references: Sequence[str]) -> float:
    return float(any(normalised(answer) == normalised(r) for r in references))


def token_f1(answer: str, references: Sequence[str]) -> float:
    """The best token F1 of the answer against any reference."""
    return max((_f1(normalised(answer).split(), normalised(r).split()) for r in references),
               default=0.0)


def _f1(predicted: list[str], reference: list[str]) -> float:
    common = sum((Counter(predicted) & Counter(reference)).values())
    if not common:
        return float(predicted == reference)  # both empty: a match
    precision, recall = common / len(predicted), common / len(reference)
    return 2 * precision * recall / (precision + recall)


def percentile(values: Sequence[float], share: float) -> float | None:
    """The nearest-rank percentile (``share`` 0.5: the median of an odd count)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None
