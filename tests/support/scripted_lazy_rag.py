"""Scripted ``lazy-rag``, ``lazy-rag-expand`` and ``lazy-rag-status`` services on the
real bus, for testing LazyRAG's interfaces (gateway, client, CLI) apart from the real
retrieval (tests/support/scripted_rag.py does the same for graph-rag and document-rag).

The answer is the RAG record sequence of PROTOCOL §2, steered by the same directive
(``[tokens=N fail_after=K ...]``) plus ``summary_fail=1``: the LLM "fails", so the
final record carries ``summary_error`` and no text, the subgraph still there; and
``cache_miss=1``: the communities were computed for it (else cached, a "hit"). The
subgraph depends on the request (scope, ``max_entities``, ``max_hops``,
``use_communities``: ``subgraph_for``), so a test sees that its options arrived.
"""
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from tests.support.scripted_llm import PROMPT_TOKENS, expected_text, token
from tests.support.scripted_rag import (
    MODEL,
    RagScript,
    ScriptedRag,
    ScriptedRagGateway,
    scripted_rag_gateway,
    sources_for,
)
from trustgraph.base import Context, HandledError, ProcessorSettings, Service
from trustgraph.schema import (
    CommunityCacheState,
    Error,
    LazyCommunity,
    LazyEntity,
    LazyRagExpandRequest,
    LazyRagExpandResponse,
    LazyRagRequest,
    LazyRagResponse,
    LazyRagStatusRequest,
    LazyRagStatusResponse,
    LazyRelationship,
    Term,
)

CONFIDENCE = 0.75
GENERATION_MS = 12.5
SUMMARY_ERROR = Error(type="llm-error", message="scripted LLM failure")
STATUS = {"max_hops": 3, "max_entities": 40, "use_communities": True,
          "summary_model": "scripted-summary"}


def missing_for(query: str) -> list[str]:
    return [f"anything about {query!r} beyond the graph"]


def subgraph_for(request: LazyRagExpandRequest) -> dict[str, Any]:
    """The lazy fields of an answer to ``request``: at most three entities (fewer when
    ``max_entities`` says), named after the scope; a community unless turned off."""
    where = f"{request.user}/{request.collection}"
    hops = request.max_hops or 2
    communities = request.use_communities is not False
    entities = [LazyEntity(id=f"http://ex/{where}/e{n}", label=f"{request.collection} {n}",
                           hops=min(n, hops), score=1.0 if n == 0 else 0.0,
                           community="c0" if communities else None)
                for n in range(min(3, request.max_entities or 50))]
    relationships = [LazyRelationship(
        s=Term(t="i", i=entities[0].id), p=Term(t="i", i="http://ex/knows"),
        o=Term(t="i", i=entities[-1].id), text=f"{entities[0].label} — knows — "
        f"{entities[-1].label}", document_id="doc1", chunk_id=f"{where}/doc1/c0")]
    community = LazyCommunity(id="c0", size=len(entities),
                              members=[entity.label for entity in entities],
                              relations=[relationships[0].text])
    cache = ("miss" if RagScript().updated(request.query).cache_miss else "hit") \
        if communities else None
    return {"entities": entities, "relationships": relationships,
            "communities": [community] if communities else [],
            "confidence": CONFIDENCE, "missing_info": missing_for(request.query),
            "generation_time_ms": GENERATION_MS, "community_cache": cache}


def wire_subgraph(request: dict[str, Any]) -> dict[str, Any]:
    """``subgraph_for`` as the gateway's REST answers and the client library give it:
    plain JSON, each field there (null when unset; a bus record leaves those out)."""
    fields = subgraph_for(LazyRagExpandRequest.model_validate(request))
    return {key: [item.model_dump(exclude_none=True) for item in value]
            if isinstance(value, list) and value and hasattr(value[0], "model_dump")
            else value for key, value in fields.items()}


@dataclass
class ScriptedLazyRag(ScriptedRag):
    """The three LazyRAG services, recording what they saw as ``ScriptedRag`` does."""

    names = ("lazy-rag", "lazy-rag-expand", "lazy-rag-status")

    def services(self, settings: ProcessorSettings) -> list[Service]:
        return [Service("lazy-rag", LazyRagRequest, LazyRagResponse, self._handler("lazy-rag")),
                Service("lazy-rag-expand", LazyRagExpandRequest, LazyRagExpandResponse,
                        self._expand),
                Service("lazy-rag-status", LazyRagStatusRequest, LazyRagStatusResponse,
                        self._status)]

    async def _expand(self, request: LazyRagExpandRequest, ctx: Context
                      ) -> LazyRagExpandResponse:
        self.requests.append(request)
        self.ids.append(ctx.id)
        if self.script.updated(request.query).fail_after is not None:
            raise HandledError("lazy-rag-expand-error", "scripted failure")
        return LazyRagExpandResponse(**subgraph_for(request))

    async def _status(self, request: LazyRagStatusRequest, ctx: Context
                      ) -> LazyRagStatusResponse:
        self.requests.append(request)
        cache = CommunityCacheState(collection=request.collection or "default",
                                    graph_version=4, cached_version=4, fresh=True,
                                    communities=1, levels=1, entities=3)
        return LazyRagStatusResponse(**STATUS, community_cache=[cache])

    async def _answer(self, name: str, request: LazyRagRequest
                      ) -> AsyncIterator[LazyRagResponse]:
        script = self.script.updated(request.query)
        if not script.summary_fail:
            async for record in super()._answer(name, request):
                yield _lazy(record, request) if record.end_of_stream else record
            return
        sources = sources_for(name, request.user, request.collection)
        if request.streaming:
            yield LazyRagResponse(message_type="metadata", sources=sources)
        yield LazyRagResponse(
            message_type="chunk" if request.streaming else None,
            chunk="" if request.streaming else None, end_of_stream=True,
            end_of_session=True, sources=sources, summary_error=SUMMARY_ERROR,
            **subgraph_for(request))


def _lazy(final: Any, request: LazyRagRequest) -> LazyRagResponse:
    """A RAG final record with the lazy fields added (an error record stays as it is)."""
    if final.error is not None:
        return LazyRagResponse(**final.model_dump(exclude_none=True))
    return LazyRagResponse(**final.model_dump(exclude_none=True), **subgraph_for(request))


@asynccontextmanager
async def scripted_lazy_rag_stack(broker_url: str) -> AsyncIterator[ScriptedRagGateway]:
    """The scripted LazyRAG services on a new flow behind a gateway with LazyRAG on
    (``url``) and one with it off (``off_url``)."""
    async with scripted_rag_gateway(broker_url, rag=ScriptedLazyRag(), lazy_rag=True) as stack:
        yield stack


__all__ = ["CONFIDENCE", "GENERATION_MS", "MODEL", "PROMPT_TOKENS", "STATUS",
           "SUMMARY_ERROR", "ScriptedLazyRag", "expected_text", "missing_for",
           "scripted_lazy_rag_stack", "subgraph_for", "token", "wire_subgraph"]
