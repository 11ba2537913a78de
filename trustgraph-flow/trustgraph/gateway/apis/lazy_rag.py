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

LazyRAG is optional: ``LAZY_RAG_ENABLED`` false (the gateway's settings include
LazyRAG's own), or no lazy-rag processor running, and its three services answer 404
``disabled`` on every transport, saying how to turn it on. Its answers are timed
here, where all of them pass (websocket and REST alike): the processor runs in a
process with no HTTP port.
"""
import json
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from prometheus_client import Counter, Histogram
from pydantic import BaseModel, ConfigDict, ValidationError

from trustgraph.answers import Done, Reader
from trustgraph.schema import (
    CommunityCacheState,
    LazyRagExpandRequest,
    LazyRagExpandResponse,
    LazyRagResponse,
    LazyRagStatusRequest,
    LazyRagStatusResponse,
    Response,
    Source,
)
from trustgraph.schema.lazy_rag import LazyRagOptions

from ..core import (
    REF,
    REQUESTS,
    Caller,
    Core,
    Dispatcher,
    Document,
    GatewayError,
    Refs,
    bad_request,
    json_body,
    new_request_id,
    validation_message,
)
from .collected import Collected
from .lines import UsageLine, done_model, with_result
from .query import Collect, respond

LAZY_RAG_PATH = "/api/v1/lazy-rag"
SERVICES = ("lazy-rag", "lazy-rag-expand", "lazy-rag-status")
HOW = ("to enable it, set LAZY_RAG_ENABLED=true (the default) where tg-start and "
       "the gateway run and restart them, or run the service: tg-run lazy-rag")
EXPAND_FIELDS = LazyRagExpandResponse.result_fields
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


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str
    summary: str | None  # null when the LLM failed (then ``summary_error`` says why)
    sources: list[Source]
    usage: UsageLine


class _Expansion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str


# With the records' result fields as they declare them: the subgraph, the confidence,
# what is missing (and the answer's ``summary_error``).
LazyAnswer = with_result(_Answer, LazyRagResponse, "LazyAnswer")
LazyExpansion = with_result(_Expansion, LazyRagExpandResponse, "LazyExpansion")


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
    data: LazyAnswer  # type: ignore[valid-type]  # a model made from the record
    meta: Meta


class LazyExpandEnvelope(BaseModel):
    data: LazyExpansion  # type: ignore[valid-type]
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


# --- metrics ------------------------------------------------------------------------

SECONDS = Histogram(
    "lazy_rag_query_duration_seconds", "LazyRAG answers: request to final record",
    buckets=(.05, .1, .25, .5, 1, 2, 3, 5, 10, 30, 60, 120))
COMMUNITY_CACHE_HITS = Counter(
    "lazy_rag_community_cache_hits", "LazyRAG answers whose communities were cached")
COMMUNITY_CACHE_MISSES = Counter(
    "lazy_rag_community_cache_misses",
    "LazyRAG answers that had to compute their collection's communities first")


def answered(seconds: float, final: bytes) -> None:
    """One lazy-rag answer: its duration, and whether its communities were cached (an
    answer without communities, or a failed one, counts neither)."""
    SECONDS.observe(seconds)
    record = json.loads(final)
    events = Reader(LazyRagResponse).read(record, True) if isinstance(record, dict) else []
    cache = events[-1].result.get("community_cache") \
        if events and isinstance(events[-1], Done) else None
    if cache == "hit":
        COMMUNITY_CACHE_HITS.inc()
    elif cache == "miss":
        COMMUNITY_CACHE_MISSES.inc()


# --- the routes ---------------------------------------------------------------------

def install(core: Core) -> None:
    options = LazyRagOptions.model_validate(core.settings, from_attributes=True)
    core.client.optional(SERVICES, HOW, on=options.lazy_rag_enabled)
    core.client.observe("lazy-rag", answered)
    endpoint = LazyRagEndpoint(core.client, options)
    core.route("POST", f"{LAZY_RAG_PATH}/query", endpoint.query)
    core.route("POST", f"{LAZY_RAG_PATH}/expand", endpoint.expand)
    core.route("GET", f"{LAZY_RAG_PATH}/status", endpoint.status)
    core.document(DOCUMENT)


class LazyRagEndpoint:
    """The three routes. ``options``: LazyRAG's settings as this gateway has them
    (tg-start gives the service the same), reported by the status while no service
    answers for itself (turned off, or not running)."""

    def __init__(self, dispatcher: Dispatcher, options: LazyRagOptions) -> None:
        self.dispatcher = dispatcher
        self.options = options

    async def query(self, request: web.Request, caller: Caller) -> web.StreamResponse:
        body = await json_body(request)
        row = self.dispatcher.resolve("lazy-rag", body.get("flow", "default"))
        asked = _valid(LazyQueryBody, body)
        record = self.dispatcher.prepare(row, {
            **asked.model_dump(exclude={"stream", "flow"}, exclude_unset=True),
            "streaming": True}, where="")
        REQUESTS.labels(row.name, "rest").inc()
        return await respond(request, self.dispatcher, caller, row, asked.flow, record,
                             asked.stream, _answer(asked.query))

    async def expand(self, request: web.Request, caller: Caller) -> web.Response:
        body = await json_body(request)
        row = self.dispatcher.resolve("lazy-rag-expand", body.get("flow", "default"))
        asked = _valid(LazyExpandBody, body)
        record = self.dispatcher.prepare(row, asked.model_dump(
            exclude={"flow"}, exclude_unset=True), where="")
        REQUESTS.labels(row.name, "rest").inc()
        request_id = new_request_id()
        final = await self.dispatcher.final(row, asked.flow, record, request_id,
                                            caller=caller)
        return enveloped({"query": asked.query, **_picked(final, EXPAND_FIELDS)}, request_id)

    async def status(self, request: web.Request, caller: Caller) -> web.Response:
        asked = _valid(LazyStatusQuery, dict(request.query))
        request_id = new_request_id()
        if not self.options.lazy_rag_enabled:
            return enveloped(self._unserved("LazyRAG is turned off on this gateway "
                                            "(LAZY_RAG_ENABLED=false)"), request_id)
        # Only what was asked: a user not named is the caller's (``frames``).
        record = LazyRagStatusRequest.model_validate(asked.model_dump(
            exclude={"flow"}, exclude_unset=True))
        REQUESTS.labels("lazy-rag-status", "rest").inc()
        try:
            final = await self.dispatcher.final(
                self.dispatcher.resolve("lazy-rag-status", asked.flow), asked.flow, record,
                request_id, caller=caller)
        except GatewayError as error:
            if error.type != "disabled":
                raise
            return enveloped(self._unserved(error.message), request_id)
        return enveloped({**_picked(final, STATUS_FIELDS), "message": None}, request_id)

    def _unserved(self, why: str) -> dict[str, Any]:
        """The status while no service answers: off, the environment's settings, why,
        and (unless ``why`` says already) how to turn it on."""
        options = self.options
        return {"enabled": False, "max_hops": options.lazy_rag_max_hops,
                "max_entities": options.lazy_rag_max_entities,
                "use_communities": options.lazy_rag_use_communities,
                "summary_model": options.lazy_rag_summary_model, "community_cache": [],
                "message": why if HOW in why else f"{why}; {HOW}"}



def _valid(model: type[BaseModel], body: dict[str, Any]) -> Any:
    try:
        return model.model_validate(body)
    except ValidationError as error:
        raise bad_request(validation_message(error, where="")) from None


def _answer(query: str) -> Collect:
    """The enveloped result of a whole answer to ``query``: the summary (null when
    its LLM call failed), the record's result fields, the sources and the usage."""
    def enveloped_answer(whole: Collected, request_id: str) -> dict[str, Any]:
        data = {"query": query, "summary": None if whole.failure else whole.text,
                **whole.result, "sources": whole.sources or [], "usage": asdict(whole.usage)}
        return envelope(data, request_id)
    return enveloped_answer


def _picked(record: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    return {name: record.get(name) for name in fields}


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --- the OpenAPI document ---------------------------------------------------------------

BODIES = (LazyQueryBody, LazyExpandBody)
ANSWERS = (LazyAnswerEnvelope, LazyExpandEnvelope, LazyStatusEnvelope)


def _paths(refs: Refs) -> dict[str, Any]:
    """``/api/v1/lazy-rag/{query,expand,status}``, answering in the seed's envelope."""
    query, expand = (refs[(model, "validation")] for model in BODIES)
    answer, expansion, status = (refs[(model, "serialization")] for model in ANSWERS)
    lines = {"oneOf": [{"$ref": REF.format(model=name)} for name in (
        "MetadataLine", "ContentLine", "ErrorLine")] + [
        refs[(done_model(LazyRagResponse), "serialization")]],
        "description": "one of these per line, as /api/v1/query in mode lazy"}
    return {
        f"{LAZY_RAG_PATH}/query": {"post": _operation(
            "LazyRAG: an answer summarised now from the subgraph the question touches",
            'Without "stream": one result in {"data", "meta"}; when the LLM fails, '
            "data.summary is null and data.summary_error says why, the subgraph, "
            'confidence and missing_info still there. With "stream": true, NDJSON lines.',
            query, {"application/json": {"schema": answer},
                    "application/x-ndjson": {"schema": lines}})},
        f"{LAZY_RAG_PATH}/expand": {"post": _operation(
            "LazyRAG's retrieval alone (no LLM)", "The subgraph, its communities, the "
            "confidence and the missing information, in {\"data\", \"meta\"}.",
            expand, {"application/json": {"schema": expansion}})},
        f"{LAZY_RAG_PATH}/status": {"get": {
            **_operation(
                "LazyRAG's settings in force and community cache",
                "Answers even while LazyRAG is off: enabled false, the LAZY_RAG_* settings "
                "of the gateway's environment, and a message saying how to enable it.",
                None, {"application/json": {"schema": status}}),
            "parameters": [{"name": name, "in": "query", "required": False,
                            "schema": {"type": "string"}}
                           for name in ("user", "collection", "flow")]}},
    }


def _operation(summary: str, description: str, body: dict | None, content: dict) -> dict:
    error = {"content": {"application/json": {"schema": {"$ref": REF.format(
        model="GatewayError")}}}}
    responses = {
        "200": {"description": "the answer", "content": content},
        "400": {"description": "bad request: the message names the field (max_hops 1-5, "
                               "max_entities 1-200, query at most 10,000 characters)", **error},
        "401": {"description": "missing or wrong token", **error},
        "404": {"description": "LazyRAG is off (LAZY_RAG_ENABLED=false, or no lazy-rag "
                               "processor running): the message says how to enable it; "
                               "or an unknown flow", **error},
        "502": {"description": "the service failed", **error},
        "504": {"description": "the service sent nothing for too long", **error}}
    operation: dict[str, Any] = {"summary": summary, "description": description,
                                 "responses": responses}
    if body is not None:
        operation["requestBody"] = {"required": True,
                                    "content": {"application/json": {"schema": body}}}
    return operation


DOCUMENT = Document((*((model, "validation") for model in BODIES),
                     *((model, "serialization") for model in ANSWERS)), _paths)
