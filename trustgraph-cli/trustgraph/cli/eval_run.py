"""Asking tg-eval's questions through the public API and scoring each answer.

Every question goes to ``POST /api/v1/query`` (streamed NDJSON; modes document,
graph and lazy), or for mode ``agent`` to the agent over the websocket (its sources
come with its final frame, which the answer-stream API's lines do not carry), at
most ``concurrency`` at once. The clock starts when the request is sent and marks
the line that brings the sources (the ``metadata`` line; the agent's final frame),
the first ``content`` line (the agent's first answer piece), and the end. A
question whose answer ends in an error is counted as an error and scores nothing;
the summary counts the errors by what they said, so the table can say why.
"""
import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from trustgraph.api import AgentAnswer, AgentFinal, AgentStream, AsyncTrustGraph, TrustGraphError

from . import eval_metrics as m
from .eval_convert import Question

QUERY_PATH = "api/v1/query"
JUDGE = "eval-judge"


@dataclass
class Outcome:
    """What the API answered one question, and when."""

    sources: list[dict] = field(default_factory=list)
    answer: str = ""
    to_sources: float | None = None  # seconds
    to_first_token: float | None = None
    total: float | None = None
    in_token: int = 0
    out_token: int = 0
    error: str | None = None


async def ask(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> Outcome:
    outcome, parts = Outcome(), list[str]()
    started = time.perf_counter()
    try:
        async with session.post(url.rstrip("/") + "/" + QUERY_PATH, json=body) as response:
            if response.status != 200:
                outcome.error = refusal(response.status, await response.text())
                return outcome
            async for raw in response.content:
                if raw.strip():
                    _read(json.loads(raw), time.perf_counter() - started, outcome, parts)
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as error:
        outcome.error = f"{type(error).__name__}: {error}"
    outcome.answer = "".join(parts)
    return outcome


async def ask_agent(client: AsyncTrustGraph, body: dict[str, Any]) -> Outcome:
    outcome, parts = Outcome(), list[str]()
    started = time.perf_counter()
    try:
        stream: AgentStream = client.agent(body["query"], user=body.get("user"),
                              collection=body.get("collection"), streaming=True,
                              flow=body.get("flow", "default"))  # type: ignore[assignment]
        async for event in stream:
            elapsed = time.perf_counter() - started
            if isinstance(event, AgentAnswer):
                parts.append(event.text)
                if outcome.to_first_token is None:
                    outcome.to_first_token = elapsed
            elif isinstance(event, AgentFinal):
                outcome.sources, outcome.to_sources = list(event.sources), elapsed
                outcome.total = elapsed
                outcome.in_token = event.usage.in_token or 0
                outcome.out_token = event.usage.out_token or 0
    except TrustGraphError as error:
        outcome.error = f"{error.type}: {error.message}"
    outcome.answer = "".join(parts)
    return outcome


def refusal(status: int, body: str) -> str:
    """A refused question as ``type: message (HTTP status)``, from the gateway's JSON
    error body (``{"error": {"type", "message"}}``), else the body's start."""
    try:
        error = json.loads(body)["error"]
        return f"{error['type']}: {error['message']} (HTTP {status})"
    except (ValueError, KeyError, TypeError):
        return f"HTTP {status}: {body[:300]}"


def _read(line: dict, elapsed: float, outcome: Outcome, parts: list[str]) -> None:
    kind = line.get("type")
    if kind == "metadata" and line.get("sources"):
        outcome.sources, outcome.to_sources = line["sources"], elapsed
    elif kind == "content":
        parts.append(line.get("delta") or "")
        if outcome.to_first_token is None:
            outcome.to_first_token = elapsed
    elif kind == "done":
        outcome.total = elapsed
        usage = line.get("usage") or {}
        outcome.in_token, outcome.out_token = (usage.get("in_token") or 0,
                                               usage.get("out_token") or 0)
        if line.get("sources") and not outcome.sources:  # the agent's
            outcome.sources, outcome.to_sources = line["sources"], elapsed
    elif kind == "error":
        outcome.error = f"{line.get('error_type')}: {line.get('message')}"
    if kind == "metadata" and outcome.to_sources is None:
        outcome.to_sources = elapsed  # an empty metadata line: nothing was found


def score(question: Question, outcome: Outcome) -> dict[str, Any]:
    """One question's measures (docs/evaluation.md); None where one does not apply."""
    documents = m.cited_documents(outcome.sources)
    expected = set(question.expected)
    ranks = m.relevant_ranks(documents, expected)
    scores: dict[str, Any] = {
        "id": question.id, "question": question.question, "expected": list(question.expected),
        "cited": [d.id for d in documents[:m.DEPTH]], "error": outcome.error,
        "to_sources_ms": _ms(outcome.to_sources),
        "to_first_token_ms": _ms(outcome.to_first_token), "total_ms": _ms(outcome.total),
        "in_token": outcome.in_token, "out_token": outcome.out_token}
    if outcome.error is not None:
        return scores
    if expected:
        scores.update({f"recall@{k}": m.recall_at(ranks, len(expected), k) for k in (1, 5, 10)})
        scores.update(mrr=m.reciprocal_rank(ranks), ndcg=m.ndcg_at(ranks, len(expected)),
                      cited_precision=m.cited_precision(outcome.answer, outcome.sources,
                                                        expected))
    if question.answers:
        scores.update(exact_match=m.exact_match(outcome.answer, question.answers),
                      f1=m.token_f1(outcome.answer, question.answers))
    scores["answer"] = outcome.answer
    return scores


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


async def judge(client: AsyncTrustGraph, question: Question, scores: dict, outcome: Outcome,
                flow: str) -> None:
    """The ``eval-judge`` prompt's grades of the answer, added to ``scores``."""
    variables: dict[str, Any] = {
        "question": question.question, "answer": outcome.answer,
        "sources": [s.get("text") or "" for s in outcome.sources[:m.DEPTH]]}
    if question.answers:
        variables["reference"] = question.answers[0]
    try:
        graded = await client.prompt(JUDGE, variables, flow=flow)
        scores["faithfulness"] = float(graded["faithfulness"])
        scores["relevance"] = float(graded["relevance"])
    except Exception as error:  # a judge that fails leaves the question unjudged
        scores["judge_error"] = f"{type(error).__name__}: {error}"


async def run_setting(url: str, token: str | None, questions: list[Question],
                      body: dict[str, Any], concurrency: int, use_judge: bool,
                      advance: Callable[[], None]) -> list[dict[str, Any]]:
    """Every question asked with ``body`` (the API's fields but the question), at most
    ``concurrency`` at once; their scores, in the questions' order."""
    slots = asyncio.Semaphore(concurrency)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    timeout = aiohttp.ClientTimeout(total=None, sock_read=600)
    async with aiohttp.ClientSession(headers=headers, timeout=timeout) as session, \
            AsyncTrustGraph(url, token) as client:
        async def one(question: Question) -> dict[str, Any]:
            async with slots:
                asked = {**body, "query": question.question, "stream": True}
                outcome = await (ask_agent(client, asked) if body.get("mode") == "agent"
                                 else ask(session, url, asked))
                scores = score(question, outcome)
                if use_judge and outcome.error is None and outcome.answer:
                    await judge(client, question, scores, outcome, body.get("flow", "default"))
            advance()
            return scores
        return await asyncio.gather(*(one(q) for q in questions))


MEASURES = ("recall@1", "recall@5", "recall@10", "mrr", "ndcg", "cited_precision",
            "exact_match", "f1", "faithfulness", "relevance")


def summary(scores: list[dict[str, Any]]) -> dict[str, Any]:
    """The setting's figures: means of the measures over the questions they apply
    to, percentiles of the times, token totals, the errors counted by message."""
    answered = [s for s in scores if s["error"] is None]
    result: dict[str, Any] = {"questions": len(scores), "errors": len(scores) - len(answered)}
    # Why they failed: each distinct error and how many questions ended in it, most first.
    result["failures"] = dict(Counter(s["error"] for s in scores
                                      if s["error"] is not None).most_common())
    for measure in MEASURES:
        result[measure] = m.mean(s.get(measure) for s in answered)
    for clock in ("to_sources_ms", "to_first_token_ms", "total_ms"):
        times = [s[clock] for s in answered if s[clock] is not None]
        result[f"{clock[:-3]}_p50_ms"] = m.percentile(times, 0.5)
        result[f"{clock[:-3]}_p95_ms"] = m.percentile(times, 0.95)
    result["in_token"] = sum(s["in_token"] for s in answered)
    result["out_token"] = sum(s["out_token"] for s in answered)
    return result
