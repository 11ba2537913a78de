"""Why an answer cited what it cited: a RAG answer's retrieval explanation, kept
with its trace (docs/observability.md, ``tg-show-explain-trace``).

The RAG handler opens one per request (``begin``) when its span records; the
steps of retrieval add to it through ``current()`` as they go (the question as
asked and rewritten, the seed entities and their scores, the candidate chunks or
edges with their scores and which were kept), and ``finish`` adds the prompt's
size, the model and the tokens, and writes it onto the request's span as
``tg.explain`` (JSON), which the trace store keeps beside the trace and any OTLP
backend receives with the span. Not traced: nothing is gathered.

Lists are bounded (``MAX_ITEMS``, texts ``MAX_TEXT``): an explanation is for
reading, and a span must stay small.
"""
import json
from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from typing import Any

from opentelemetry.trace import Span

from trustgraph import tracing
from trustgraph.schema import ScoredEntity

MAX_ITEMS = 200
MAX_TEXT = 300


@dataclass
class Candidate:
    """A chunk or an edge retrieval considered, what each ranking scored it, and
    whether it went into the prompt."""

    kind: str  # "chunk" or "edge"
    id: str  # the chunk's id (an edge: the chunk it was extracted from)
    text: str
    scores: dict[str, float]
    kept: bool
    document_id: str = ""


@dataclass
class Explanation:
    service: str
    question: str
    optimized_query: str | None = None
    subqueries: list[str] = field(default_factory=list)
    searches: list[str] = field(default_factory=list)
    seeds: list[dict[str, Any]] = field(default_factory=list)  # entity, label, score
    chunk_seeds: list[Candidate] = field(default_factory=list)  # graph-rag mixed
    candidates: list[Candidate] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # a service's own (lazy-rag)
    template: str = ""
    prompt_chars: int = 0
    model: str | None = None
    in_token: int | None = None
    out_token: int | None = None

    def seed(self, found: Iterable[ScoredEntity]) -> None:
        self.seeds = [{"entity": s.entity.value, "label": s.label, "score": round(s.score, 6)}
                      for s in list(found)[:MAX_ITEMS]]

    def consider(self, candidates: Iterable[Candidate], chunk_seeds: bool = False) -> None:
        kept = [_bounded(c) for c in list(candidates)[:MAX_ITEMS]]
        if chunk_seeds:
            self.chunk_seeds = kept
        else:
            self.candidates = kept

    def prompt(self, template: str, variables: dict[str, Any]) -> None:
        self.template = template
        self.prompt_chars = len(json.dumps(variables, ensure_ascii=False))

    def as_json(self) -> str:
        body = asdict(self)
        body["kept"] = sum(1 for c in self.candidates if c.kept)
        body["considered"] = len(self.candidates)
        return json.dumps(body, ensure_ascii=False)


_CURRENT: ContextVar[tuple[Explanation, Span] | None] = ContextVar("explanation",
                                                                  default=None)


def begin(service: str, question: str) -> Explanation | None:
    """An explanation for the request being served, when its span records."""
    span = tracing.current_span()
    if span is None:
        return None
    explanation = Explanation(service, question)
    span.set_attribute(tracing.names.INPUT, tracing.names.bounded(question))
    _CURRENT.set((explanation, span))
    return explanation


def current() -> Explanation | None:
    """The explanation being gathered for this request, if any."""
    found = _CURRENT.get()
    return found[0] if found is not None else None


def finish(explanation: Explanation | None, model: str | None, in_token: int | None,
           out_token: int | None) -> None:
    """The answer is written: its model and tokens added, the whole put on its span."""
    found = _CURRENT.get()
    if explanation is None or found is None or found[0] is not explanation:
        return
    explanation.model, explanation.in_token, explanation.out_token = \
        model, in_token, out_token
    found[1].set_attribute(tracing.names.EXPLAIN, explanation.as_json())


def _bounded(candidate: Candidate) -> Candidate:
    text = candidate.text
    if len(text) > MAX_TEXT:
        candidate.text = text[:MAX_TEXT] + "…"
    return candidate
