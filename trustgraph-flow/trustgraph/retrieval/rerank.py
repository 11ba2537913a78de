"""Reranking the chunks found, through the configured LLM (opt-in per request:
``rerank`` on a document-rag request or a ``/api/v1/query`` body).

Listwise: the question and the fused top ``candidates`` chunks, each cut to
``passage_chars`` characters, go to the ``rerank`` prompt (prompt store), which
answers the passage numbers best first; the chunks it names lead, in its order, and
those it left out follow in their fused order, so reranking reorders and never
loses a chunk. One prompt call per question, bounded: at most ``candidates`` ×
``passage_chars`` characters of passages, and ``timeout`` seconds. When the model
is late, fails, or answers something other than passage numbers, the fused order
stands and the answer goes on: a reranker that cannot answer must not cost the
user the answer (the log says why).

Why an LLM and not a cross-encoder: no cross-encoder (ms-marco MiniLM, bge-reranker,
jina, flashrank's) ships its weights inside a PyPI package that could be installed
here, and nothing may download at run time (docs/retrieval.md has the search).
"""
import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from trustgraph.base import (
    HandledError,
    ProcessorSettings,
    PromptClient,
    RequestTimeout,
    ServiceError,
)
from trustgraph.schema import Usage

log = logging.getLogger(__name__)

TEMPLATE = "rerank"


class RerankSettings(ProcessorSettings):
    tg_rerank_candidates: int = Field(10, ge=2, le=50, description=(
        "fused chunks the reranker orders (a request asking rerank retrieves at least "
        "this many, and keeps its doc-limit best)"))
    tg_rerank_passage_chars: int = Field(600, ge=50, le=4000, description=(
        "characters of each chunk the reranker reads: with the candidates, the "
        "prompt's budget"))
    tg_rerank_timeout: float = Field(10.0, gt=0, description=(
        "seconds the reranking prompt may take before the fused order is kept"))


def _default(name: str) -> Any:
    return RerankSettings.model_fields[f"tg_rerank_{name}"].default


@dataclass(frozen=True)
class Reranking:
    """The settings' values; unset here, their defaults."""

    candidates: int = _default("candidates")
    passage_chars: int = _default("passage_chars")
    timeout: float = _default("timeout")

    @classmethod
    def of(cls, settings: object) -> "Reranking":
        if not isinstance(settings, RerankSettings):
            return cls()
        return cls(settings.tg_rerank_candidates, settings.tg_rerank_passage_chars,
                   settings.tg_rerank_timeout)


@dataclass
class Reranked:
    order: list[int]  # indexes into the candidates, best first, every one once
    usage: Usage
    applied: bool  # False: the fused order was kept (the log says why)


async def rerank(prompts: PromptClient, query: str, passages: list[tuple[str, str]],
                 reranking: Reranking) -> Reranked:
    """The order of ``passages`` ((title, text) pairs, in fused order) best first."""
    fused = list(range(len(passages)))
    if len(passages) < 2:
        return Reranked(fused, Usage(), False)
    variables = {"query": query, "passages": [
        {"n": n, "title": title, "text": _cut(text, reranking.passage_chars)}
        for n, (title, text) in enumerate(passages, 1)]}
    try:
        async with asyncio.timeout(reranking.timeout):
            result = await prompts.invoke(TEMPLATE, variables)
    except TimeoutError:
        log.warning("rerank: no answer in %g s; keeping the fused order", reranking.timeout)
        return Reranked(fused, Usage(), False)
    except (ServiceError, RequestTimeout, HandledError) as error:
        log.warning("rerank: the %s prompt failed (%s); keeping the fused order",
                    TEMPLATE, error)
        return Reranked(fused, Usage(), False)
    order = ranked(result.object, len(passages))
    if order is None:
        log.warning("rerank: the %s prompt answered %r, not passage numbers; keeping "
                    "the fused order", TEMPLATE, result.object)
        return Reranked(fused, result.usage, False)
    return Reranked(order, result.usage, True)


def ranked(answer: object, count: int) -> list[int] | None:
    """Indexes best first: the passages the answer names (numbers from 1, each once,
    unknown ones ignored), then the rest in their fused order; None when the answer
    names no passage."""
    if not isinstance(answer, list):
        return None
    named = [n - 1 for n in answer if isinstance(n, int) and not isinstance(n, bool)
             and 1 <= n <= count]
    named = list(dict.fromkeys(named))
    if not named:
        return None
    return named + [i for i in range(count) if i not in set(named)]


def _cut(text: str, limit: int) -> str:
    """At most ``limit`` characters, ending at a word."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " …"
