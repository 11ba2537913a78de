"""LazyRAG's own REST endpoints (PROTOCOL §3), answered in the envelope its clients
expect: ``{"data": {...}, "meta": {"requestId", "timestamp"}}``.

* ``POST /api/v1/lazy-rag/query``: the answer. ``stream: true`` gives the answer-stream
  API's NDJSON lines (as ``/api/v1/query`` with ``mode: "lazy"``); otherwise one
  enveloped result: the summary, the subgraph it was written from, the communities,
  the confidence and what is missing.
* ``POST /api/v1/lazy-rag/expand``: the same retrieval, no LLM.
* ``GET /api/v1/lazy-rag/status``: the settings in force and the community cache;
  it answers even when LazyRAG is off (``enabled: false`` and how to turn it on),
  while the other two are a 404 saying so.

The request limits are the service record's own (``max_hops`` 1–5, ``max_entities``
1–200, a query of at most 10,000 characters): a bad one is a 400 naming the field.
"""
import json
from contextlib import aclosing
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, ValidationError

from trustgraph.base import ServiceError
from trustgraph.retrieval.lazy_rag.settings import LazyRagSettings
from trustgraph.schema import (
    CommunityCacheState,
    Error,
    LazyRagExpandRequest,
    LazyRagExpandResponse,
    LazyRagStatusRequest,
    LazyRagStatusResponse,
    Response,
    Source,
)

from .answers import AnswerLines, LazyResult, LazySubgraph, UsageLine, respond
from .dispatch import Dispatcher, new_request_id
from .errors import GatewayError, bad_request, validation_message
from .metrics import REQUESTS
from .responses import json_body
from .services import SERVICES

LAZY_RAG_PATH = "/api/v1/lazy-rag"
EXPAND_FIELDS = tuple(name for name in LazyRagExpandResponse.model_fields
                      if name not in Response.model_fields)
STATUS_FIELDS = tuple(name for name in LazyRagStatusResponse.model_fields
                      if name not in Response.model_fields)


# The bodies: the service's request record, plus where to send it and how to answer.

class LazyQueryBody(LazyRagExpandRequest):
    stream: bool = False  # NDJSON lines instead of one enveloped result
    flow: str = "default"


class LazyExpandBody(LazyRagExpandRequest):
    flow: str = "default"


class LazyStatusQuery(LazyRagStatusRequest):
    flow: str = "default"


# The answers, for the OpenAPI document (unit tests hold the routes to them).

class Meta(BaseModel):
    model_config = ConfigDict(extra="forbid")

    requestId: str  # the request's id on the bus: every processor's log lines carry it
    timestamp: str  # ISO 8601, UTC


class LazyAnswer(LazyResult):
    query: str
    summary: str | None  # null when the LLM failed (then ``summary_error`` says why)
    sources: list[Source]
    usage: UsageLine


class LazyExpansion(LazySubgraph):
    query: str


class LazyStatus(BaseModel):
    """The status record's fields (``STATUS_FIELDS``), and why no service answered."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool
    max_hops: int
    max_entities: int
    use_communities: bool
    summary_model: str | None
    community_cache: list[CommunityCacheState]
    message: str | None  # when nothing serves LazyRAG: why, and how to turn it on


class LazyAnswerEnvelope(BaseModel):
    data: LazyAnswer
    meta: Meta


class LazyExpandEnvelope(BaseModel):
    data: LazyExpansion
    meta: Meta


class LazyStatusEnvelope(BaseModel):
    data: LazyStatus
    meta: Meta


def envelope(data: dict[str, Any], request_id: str) -> dict[str, Any]:
    meta = {"requestId": request_id,
            "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds")}
    return {"data": data, "meta": meta}


def enveloped(data: dict[str, Any], request_id: str) -> web.Response:
    return web.json_response(envelope(data, request_id), dumps=_dumps)


class LazyRagEndpoint:
    """The three routes. ``settings``: the service's settings as this process's
    environment has them (tg-start gives the service the same), reported by the status
    while no service answers for itself (turned off, or not running)."""

    def __init__(self, dispatcher: Dispatcher, settings: LazyRagSettings) -> None:
        self.dispatcher = dispatcher
        self.settings = settings

    async def query(self, request: web.Request) -> web.StreamResponse:
        body = await json_body(request)
        row = self.dispatcher.resolve("lazy-rag", body.get("flow", "default"))
        asked = _valid(LazyQueryBody, body)
        record = self.dispatcher.prepare(row, {
            **asked.model_dump(exclude={"stream", "flow"}, exclude_none=True),
            "streaming": True}, where="")
        REQUESTS.labels(row.name, "rest").inc()
        return await respond(request, self.dispatcher, row, asked.flow, record, asked.stream,
                             collected=lambda lines: _answer(asked.query, lines))

    async def expand(self, request: web.Request) -> web.Response:
        body = await json_body(request)
        row = self.dispatcher.resolve("lazy-rag-expand", body.get("flow", "default"))
        asked = _valid(LazyExpandBody, body)
        record = self.dispatcher.prepare(row, asked.model_dump(
            exclude={"flow"}, exclude_none=True), where="")
        REQUESTS.labels(row.name, "rest").inc()
        request_id = new_request_id()
        final = await self._final(row.name, asked.flow, record, request_id)
        return enveloped({"query": asked.query, **_picked(final, EXPAND_FIELDS)}, request_id)

    async def status(self, request: web.Request) -> web.Response:
        asked = _valid(LazyStatusQuery, dict(request.query))
        request_id = new_request_id()
        if "lazy-rag-status" in self.dispatcher.off:
            return enveloped(self._unserved("LazyRAG is turned off on this gateway "
                                            "(LAZY_RAG_ENABLED=false)"), request_id)
        record = LazyRagStatusRequest.model_validate(asked.model_dump(
            exclude={"flow"}, exclude_none=True))
        REQUESTS.labels("lazy-rag-status", "rest").inc()
        try:
            final = await self._final("lazy-rag-status", asked.flow, record, request_id)
        except GatewayError as error:
            if error.type != "disabled":
                raise
            return enveloped(self._unserved(error.message), request_id)
        return enveloped({**_picked(final, STATUS_FIELDS), "message": None}, request_id)

    def _unserved(self, why: str) -> dict[str, Any]:
        """The status while no service answers: off, the environment's settings, why,
        and (unless ``why`` says already) how to turn it on."""
        how = SERVICES["lazy-rag"].optional
        settings = self.settings
        return {"enabled": False, "max_hops": settings.lazy_rag_max_hops,
                "max_entities": settings.lazy_rag_max_entities,
                "use_communities": settings.lazy_rag_use_communities,
                "summary_model": settings.lazy_rag_summary_model, "community_cache": [],
                "message": why if how in why else f"{why}; {how}"}

    async def _final(self, service: str, flow: str, record: Any, request_id: str
                     ) -> dict[str, Any]:
        """The one record a service answers once with; its error raised."""
        row = self.dispatcher.resolve(service, flow)
        final: dict[str, Any] = {}
        async with aclosing(self.dispatcher.frames(row, flow, record, request_id)) as batches:
            async for batch in batches:
                final = json.loads(batch[-1][0])
        if final.get("error"):
            raise ServiceError(Error.model_validate(final["error"]))
        return final


def _valid(model: type[BaseModel], body: dict[str, Any]) -> Any:
    try:
        return model.model_validate(body)
    except ValidationError as error:
        raise bad_request(validation_message(error, where="")) from None


def _answer(query: str, lines: AnswerLines) -> dict[str, Any]:
    collected = lines.collected()
    failed = collected.get("summary_error") is not None
    data = {"query": query, "summary": None if failed else collected["response"],
            **lines.result, "sources": collected["sources"], "usage": collected["usage"]}
    return envelope(data, lines.request_id)


def _picked(record: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    return {name: record.get(name) for name in fields}


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
