"""The request handler both RAG services share, and the frames it answers with
(PROTOCOL §2).

A request is: its unset fields given the flow's retrieval defaults
(``RetrievalParameters``), optimise the question (when asked), retrieve (the
service's own part), then answer with the service's prompt. Retrieval completes before generation
starts, so a streaming answer sends its sources first at no cost:

* streaming: one ``metadata`` record (sources, rewritten question, sub-questions),
  the prompt service's deltas relayed (``Relay``: ``chunk`` records once they leave
  the process), then one final ``chunk`` record with no text, both end flags, the
  sources again and the token totals;
* not streaming: one record with the whole ``response``, the sources and totals.

An error at any step is raised; the runtime sends it as the one final record. An
error of the relayed answer is raised where its ``Relay`` was yielded (``Relay``), so
``step`` names it as the answering step's.
"""
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from trustgraph import tracing
from trustgraph.base import (
    Clients,
    Context,
    FlowParameters,
    PromptClient,
    Relay,
    Service,
    Yielded,
)
from trustgraph.base.flows import defaulted
from trustgraph.base.steps import step
from trustgraph.schema import (
    DocumentRagRequest,
    GraphRagRequest,
    PromptResponse,
    RagResponse,
    Source,
    Usage,
)
from trustgraph.schema.retrieval import Retrieval

from . import explain
from .questions import Questions, plan_questions

log = logging.getLogger(__name__)
R = TypeVar("R", bound=RagResponse)
# What the answer's final record adds, given the prompt's token counts (its final
# record, streaming; else the whole answer's ``Usage``): the totals, and whatever
# else the service reports.
Last = Callable[[PromptResponse | Usage], dict[str, Any]]


@dataclass
class Found:
    """What retrieval found: the sources to cite and the prompt to answer with."""

    sources: list[Source]
    template: str  # prompt template id
    variables: dict[str, Any]  # its variables, the question included
    usage: Usage = field(default_factory=Usage)  # prompts retrieval ran (reranking)


class RetrievalParameters(FlowParameters):
    """A flow's retrieval defaults: what a request leaves unset takes them."""

    doc_limit: int | None = None
    entity_limit: int | None = None
    triple_limit: int | None = None
    max_path_length: int | None = None
    max_subgraph_size: int | None = None
    retrieval: Retrieval | None = None
    rerank: bool | None = None


RagRequest = GraphRagRequest | DocumentRagRequest
Q = TypeVar("Q", bound=RagRequest)
Retrieve = Callable[[Q, list[str], Clients], Awaitable[Found]]


def rag_service(name: str, error_type: str, request: type[Q],
                retrieve: Retrieve[Q]) -> Service:
    """Service ``name``: ``retrieve(request, search texts, clients)`` finds the
    evidence; this does the rest. Failures are ``error_type`` errors."""

    async def handle(request: Q, ctx: Context) -> AsyncIterator[Yielded[RagResponse]]:
        started = time.perf_counter()
        explanation = explain.begin(name, request.query)  # None: not traced
        request = defaulted(request, ctx.parameters.of(RetrievalParameters))
        prompts = PromptClient(await ctx.clients.get("prompt"))
        progress = request.streaming and request.progress
        if progress and (request.optimize_query or request.subqueries):
            yield _progress("rewriting the question" if not request.subqueries
                            else "splitting the question into sub-questions")
        questions = await plan_questions(prompts, request.query, request.optimize_query,
                                         request.subqueries, error_type)
        if progress:
            count = len(questions.searches)
            yield _progress(f"{SEARCHING.get(name, 'searching')} for {count} "
                            f"{'question' if count == 1 else 'questions'}")
        if explanation is not None:
            explanation.optimized_query = questions.optimized_query
            explanation.subqueries, explanation.searches = \
                questions.subqueries, questions.searches
        found = await retrieve(request, questions.searches, ctx.clients)
        took = (time.perf_counter() - started) * 1000
        tracing.note(tracing.names.SOURCES_MS, round(took, 3))
        log.info("id=%s %s: %d search(es), %d source(s) in %.0f ms", ctx.id, name,
                 len(questions.searches), len(found.sources), took)
        if explanation is not None:
            explanation.prompt(found.template, found.variables)

        def last(answer: PromptResponse | Usage) -> dict[str, Any]:
            totals = _totals(questions, answer, found.usage)
            explain.finish(explanation, totals["model"], totals["in_token"],
                           totals["out_token"])
            return totals

        with step(error_type, f"answering ({found.template})"):  # the relay's errors too
            yield Relay(answer_frames(
                prompts, found, request.streaming, RagResponse,
                first={"optimized_query": questions.optimized_query,
                       "subqueries": questions.subqueries},
                last=last, sampling=request.sampling()))

    return Service(name, request, RagResponse, handle, error_type=error_type)


# What each service's retrieval does, as a progress record says it.
SEARCHING = {"document-rag": "searching the documents",
             "graph-rag": "finding entities and expanding the graph"}


def _progress(text: str) -> RagResponse:
    return RagResponse(message_type="progress", progress=text)


async def answer_frames(prompts: PromptClient, found: Found, streaming: bool,
                        response: type[R], first: dict[str, Any], last: Last,
                        model: str | None = None, metadata_sent: bool = False,
                        sampling: dict[str, Any] | None = None
                        ) -> AsyncIterator[Yielded[R]]:
    """The answer's frames, as ``response`` records: ``first`` goes on the metadata
    record (and on the one record of a non-streaming answer), ``last(the prompt's
    final record)`` on the final record; ``model`` overrides the LLM's own,
    ``sampling`` its max_tokens, temperature and stop (the request's
    ``Sampling.sampling()``); ``metadata_sent``: the caller sent the metadata record already
    (``metadata_frame``), as soon as it had the sources. Every RAG service answers
    through this one sequence; streaming, its deltas are the prompt's, relayed."""
    if not streaming:
        result = await prompts.invoke(found.template, found.variables, model=model,
                                      sampling=sampling)
        yield response(response=result.text, end_of_stream=True, end_of_session=True,
                       sources=found.sources, **first, **last(result.usage))
        return
    if not metadata_sent:
        yield metadata_frame(response, found.sources, first)

    def final(answer: PromptResponse) -> R:  # no text: a client joining every chunk sees it once
        return response(message_type="chunk", chunk="", end_of_stream=True,
                        end_of_session=True, sources=found.sources, **last(answer))

    yield Relay(prompts.stream(found.template, found.variables, final, model=model,
                               sampling=sampling))


def metadata_frame(response: type[R], sources: list[Source], first: dict[str, Any]) -> R:
    """A streaming answer's first record: its sources, before any answer text."""
    return response(message_type="metadata", sources=sources, **first)


def _totals(questions: Questions, answer: PromptResponse | Usage,
            retrieval: Usage | None = None) -> dict[str, Any]:
    """The request's token totals: the optimisation prompts', retrieval's (a rerank)
    and the answer's."""
    usage = Usage().add(questions.usage).add(retrieval or Usage()).add(Usage.of(answer))
    return {"in_token": usage.in_token, "out_token": usage.out_token, "model": answer.model}
