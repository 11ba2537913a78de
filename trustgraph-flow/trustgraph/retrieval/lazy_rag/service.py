"""Processor ``lazy-rag`` (docs/lazy-rag.md): query-time summaries over the graph.

Four services:

* ``lazy-rag`` — retrieval (``retrieve.py``: seeds, expansion, communities,
  confidence, missing information), then the ``lazy-rag-summary`` prompt streamed
  through the RAG services' one frame sequence (``answer.answer_frames``): metadata
  with the sources first (sent once the subgraph is known, while the communities are
  looked up), answer deltas, one final record adding the subgraph,
  ``confidence``, ``missing_info`` and ``generation_time_ms``. When the LLM fails,
  the final record still carries all of that, with ``summary_error`` in place of
  the answer (the deltas already sent stay sent);
* ``lazy-rag-expand`` — retrieval only, one record, no LLM;
* ``lazy-rag-status`` — the settings in force and the community cache's state;
* ``collection-communities`` (bus only) — a deleted collection's cached communities
  forgotten, for ``collection-management``'s delete.

With ``LAZY_RAG_SUMMARY_MODEL`` set, the summary is written by that model (the
prompt request's ``model``, which the text-completion service uses in place of its
configured one).
"""
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from trustgraph.base import (
    Context,
    Handler,
    ProcessorSpec,
    PromptClient,
    Relay,
    RequestTimeout,
    Runtime,
    Service,
    ServiceError,
    Yielded,
)
from trustgraph.schema import (
    Error,
    LazyRagExpandRequest,
    LazyRagExpandResponse,
    LazyRagRequest,
    LazyRagResponse,
    LazyRagStatusRequest,
    LazyRagStatusResponse,
    PromptResponse,
    Usage,
)

from ...storage.owner import collection_service
from .. import explain
from ..answer import Found, answer_frames, metadata_frame
from .cache import CommunityCache, CommunityStore
from .context import TEMPLATE, Result, prompt_variables
from .graph import BusGraph
from .retrieve import find, retrieve
from .settings import LazyRagParameters, LazyRagSettings, Limits
from .subgraph import ERROR

log = logging.getLogger(__name__)

NAME = "lazy-rag"
SUMMARY_ERROR = "llm-error"


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


def query_handler(settings: LazyRagSettings, cache: CommunityCache
                  ) -> Handler[LazyRagRequest, LazyRagResponse]:
    async def handle(request: LazyRagRequest, ctx: Context
                     ) -> AsyncIterator[Yielded[LazyRagResponse]]:
        started = time.perf_counter()
        explanation = explain.begin(NAME, request.query)  # None: not traced
        limits = Limits.of(request, settings, ctx.parameters.of(LazyRagParameters))
        retrieval = await find(request, limits, cache, ctx.clients)
        try:
            # The sources are known: they go out before the communities, confidence
            # and prompt, which only the answer needs.
            if request.streaming:
                yield metadata_frame(LazyRagResponse, retrieval.sources, {})
            result = await retrieval.result()
        finally:
            retrieval.drop()
        log.info("id=%s lazy-rag: %d entities, %d relationships, %d communities, "
                 "confidence %.2f in %.0f ms", ctx.id, len(result.entities),
                 len(result.relationships), len(result.communities),
                 result.coverage.confidence, _ms(started))
        found = Found(result.sources, TEMPLATE, prompt_variables(request.query, result))
        explained(explanation, result, found)
        prompts = PromptClient(await ctx.clients.get("prompt"))

        def last(answer: PromptResponse | Usage) -> dict[str, Any]:
            explain.finish(explanation, answer.model, answer.in_token, answer.out_token)
            return {**result.fields(), "generation_time_ms": _ms(started),
                    "in_token": answer.in_token, "out_token": answer.out_token,
                    "model": answer.model}

        try:  # the relayed answer's errors are raised here
            yield Relay(answer_frames(prompts, found, request.streaming, LazyRagResponse,
                                      first={}, last=last,
                                      model=settings.lazy_rag_summary_model,
                                      metadata_sent=True, sampling=request.sampling()))
        except (ServiceError, RequestTimeout) as failure:
            yield _without_summary(request, result, failure, started)
    return handle


def explained(explanation: explain.Explanation | None, result: Result, found: Found
              ) -> None:
    """The seeds (entities that matched the question), the relationships given to
    the summary, communities and coverage, for the answer's explanation."""
    if explanation is None:
        return
    explanation.seeds = [{"entity": e.id, "label": e.label, "score": round(e.score, 6)}
                         for e in result.entities if e.hops == 0][:explain.MAX_ITEMS]
    explanation.consider(explain.Candidate("edge", r.chunk_id, r.text, {}, True,
                                           r.document_id) for r in result.relationships)
    explanation.extra = {"entities": len(result.entities),
                         "communities": len(result.communities),
                         "confidence": result.coverage.confidence,
                         "missing_info": result.coverage.missing_info}
    explanation.prompt(found.template, found.variables)


def _without_summary(request: LazyRagRequest, result: Result,
                     failure: ServiceError | RequestTimeout,
                     started: float) -> LazyRagResponse:
    """The final record when the LLM failed: everything retrieval found, and why
    there is no summary."""
    message = (f"{failure.error.type}: {failure.error.message}"
               if isinstance(failure, ServiceError) else str(failure))
    log.warning("lazy-rag: the summary failed (%s); answering with the subgraph", message)
    return LazyRagResponse(
        message_type="chunk" if request.streaming else None,
        chunk="" if request.streaming else None, end_of_stream=True, end_of_session=True,
        sources=result.sources, generation_time_ms=_ms(started),
        summary_error=Error(type=SUMMARY_ERROR,
                            message=f"the summary could not be written: {message}"),
        **result.fields())


def expand_handler(settings: LazyRagSettings, cache: CommunityCache
                   ) -> Handler[LazyRagExpandRequest, LazyRagExpandResponse]:
    async def expand(request: LazyRagExpandRequest, ctx: Context) -> LazyRagExpandResponse:
        started = time.perf_counter()
        limits = Limits.of(request, settings, ctx.parameters.of(LazyRagParameters))
        result = await retrieve(request, limits, cache, ctx.clients)
        return LazyRagExpandResponse(generation_time_ms=_ms(started), **result.fields())
    return expand


def status_handler(settings: LazyRagSettings, cache: CommunityCache
                   ) -> Handler[LazyRagStatusRequest, LazyRagStatusResponse]:
    async def status(request: LazyRagStatusRequest, ctx: Context) -> LazyRagStatusResponse:
        return LazyRagStatusResponse(
            enabled=settings.lazy_rag_enabled, max_hops=settings.lazy_rag_max_hops,
            max_entities=settings.lazy_rag_max_entities,
            use_communities=settings.lazy_rag_use_communities,
            summary_model=settings.lazy_rag_summary_model,
            community_cache=await cache.states(request.user, request.collection,
                                               BusGraph(ctx.clients)))
    return status


def services(runtime: Runtime) -> list[Service]:
    settings: LazyRagSettings = runtime.settings
    if not settings.lazy_rag_enabled:  # tg-start leaves it out; an explicit start stops
        raise SystemExit("lazy-rag is turned off (LAZY_RAG_ENABLED=false); set "
                         "LAZY_RAG_ENABLED=true to run it")
    store = CommunityStore(Path(settings.tg_data_dir) / "lazy-rag" / "communities.sqlite")
    cache = CommunityCache(store)

    async def close() -> None:
        store.close()

    return [
        Service(NAME, LazyRagRequest, LazyRagResponse, query_handler(settings, cache),
                error_type=ERROR, close=close),
        Service("lazy-rag-expand", LazyRagExpandRequest, LazyRagExpandResponse,
                expand_handler(settings, cache), error_type="lazy-rag-expand-error"),
        Service("lazy-rag-status", LazyRagStatusRequest, LazyRagStatusResponse,
                status_handler(settings, cache), error_type="lazy-rag-status-error"),
        collection_service("collection-communities", cache.delete),
    ]


SPEC = ProcessorSpec(NAME, LazyRagSettings, services,
                     uses=("prompt", "embeddings", "graph-embeddings", "subgraph",
                           "graph-version", "graph-edges"))
