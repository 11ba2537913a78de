"""The request handler both RAG services share, and the frames it answers with
(PROTOCOL §2).

A request is: optimise the question (when asked), retrieve (the service's own part),
then answer with the service's prompt. Retrieval completes before generation
starts, so a streaming answer sends its sources first at no cost:

* streaming: one ``metadata`` record (sources, rewritten question, sub-questions),
  ``chunk`` records with the answer's deltas as the prompt service streams them,
  then one final ``chunk`` record with no text, both end flags, the sources again
  and the token totals;
* not streaming: one record with the whole ``response``, the sources and totals.

An error at any step is raised; the runtime sends it as the one final record.
"""
import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from trustgraph.base import Clients, Context, PromptClient, PromptResult, Service
from trustgraph.schema import DocumentRagRequest, GraphRagRequest, RagResponse, Source

from .questions import Questions, add_tokens, plan_questions
from .steps import step

log = logging.getLogger(__name__)

# Answer deltas held between the prompt call and the records sent. A reply that
# falls behind holds the prompt call back rather than growing this buffer (what the
# prompt service sends meanwhile waits in its requester's own bounded buffer), and
# the deltas already waiting go out joined as one record.
QUEUE_DEPTH = 64


@dataclass
class Found:
    """What retrieval found: the sources to cite and the prompt to answer with."""

    sources: list[Source]
    template: str  # prompt template id
    variables: dict[str, Any]  # its variables, the question included


RagRequest = GraphRagRequest | DocumentRagRequest
Retrieve = Callable[[Any, list[str], Clients], Awaitable[Found]]


def rag_service(name: str, error_type: str, request: type[RagRequest],
                retrieve: Retrieve) -> Service:
    """Service ``name``: ``retrieve(request, search texts, clients)`` finds the
    evidence; this does the rest. Failures are ``error_type`` errors."""

    async def handle(request: RagRequest, ctx: Context) -> AsyncIterator[RagResponse]:
        started = time.perf_counter()
        prompts = PromptClient(await ctx.clients.get("prompt"))
        questions = await plan_questions(prompts, request.query, request.optimize_query,
                                         request.subqueries, error_type)
        found = await retrieve(request, questions.searches, ctx.clients)
        log.info("id=%s %s: %d search(es), %d source(s) in %.0f ms", ctx.id, name,
                 len(questions.searches), len(found.sources),
                 (time.perf_counter() - started) * 1000)
        with step(error_type, f"answering ({found.template})"):
            if not request.streaming:
                result = await prompts.invoke(found.template, found.variables)
                yield RagResponse(
                    response=result.text, end_of_stream=True, end_of_session=True,
                    sources=found.sources, optimized_query=questions.optimized_query,
                    subqueries=questions.subqueries, **_totals(questions, result))
                return
            yield RagResponse(message_type="metadata", sources=found.sources,
                              optimized_query=questions.optimized_query,
                              subqueries=questions.subqueries)
            async with aclosing(_streamed(prompts, found)) as pieces:
                async for piece in pieces:
                    if isinstance(piece, str):
                        yield RagResponse(message_type="chunk", chunk=piece)
                    else:  # the end: no text, so a client joining every chunk sees it once
                        yield RagResponse(
                            message_type="chunk", chunk="", end_of_stream=True,
                            end_of_session=True, sources=found.sources,
                            **_totals(questions, piece))

    return Service(name, request, RagResponse, handle, error_type=error_type)


def _totals(questions: Questions, answer: PromptResult) -> dict[str, Any]:
    """The request's token totals: the optimisation prompts' and the answer's."""
    return {"in_token": add_tokens(questions.in_token, answer.in_token),
            "out_token": add_tokens(questions.out_token, answer.out_token),
            "model": answer.model}


async def _streamed(prompts: PromptClient, found: Found
                    ) -> AsyncIterator[str | PromptResult]:
    """The answer's text as the prompt service streams it, then its ``PromptResult``.

    The prompt call runs in a task that feeds a bounded queue from its chunk
    callback. Closing this generator (the request cancelled, or its reply gone)
    cancels that task, which closes the prompt request, which cancels the LLM stream.
    """
    queue: asyncio.Queue[str | PromptResult | Exception] = asyncio.Queue(QUEUE_DEPTH)

    async def call() -> None:
        try:
            result = await prompts.invoke(found.template, found.variables, streaming=True,
                                          chunk_callback=queue.put)
        except Exception as error:  # raised below, in the request's own task
            await queue.put(error)
        else:
            await queue.put(result)

    task = asyncio.create_task(call())
    try:
        while True:
            texts, item = [], await queue.get()
            while isinstance(item, str):  # with the deltas already waiting
                texts.append(item)
                item = None if queue.empty() else queue.get_nowait()
            if texts:
                yield "".join(texts)
            if isinstance(item, Exception):
                raise item
            if item is not None:
                yield item
                return
    finally:
        task.cancel()
        await asyncio.wait([task])
