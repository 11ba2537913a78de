"""``POST /api/v1/query`` (also ``/query``): the answer-stream API (PROTOCOL §3).

One question in; the RAG service of the chosen ``mode`` answers it. The service is
always asked to stream, whatever ``stream`` says: its metadata record carries the
sources, the rewritten question and the sub-questions, so streamed and collected
answers are the same code and say the same things. Its records become the API's own
lines: ``metadata``, ``content`` deltas, then ``done`` with the usage, or ``error``
instead of ``done``. ``stream: false`` collects them into one JSON object.
"""
import json
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trustgraph.base import ServiceError
from trustgraph.schema import (Error, LazyCommunity, LazyEntity, LazyRelationship, Record,
                               Source)

from .dispatch import Dispatcher, new_request_id
from .errors import bad_request, validation_message
from .framing import Frame
from .metrics import REQUESTS
from .responses import NDJSON, failed, json_body, streamed
from .services import ServiceRow

QUERY_PATHS = ("/api/v1/query", "/query")
MODES = {"document": "document-rag", "graph": "graph-rag", "lazy": "lazy-rag"}
# Fields of the API itself; everything else in the body belongs to the service request.
API_FIELDS = {"stream", "mode", "flow"}
# Options only some modes' services take: given to another mode, a 400.
OPTIONS = ("entity_limit", "triple_limit", "max_subgraph_size", "max_path_length",
           "doc_limit", "max_hops", "max_entities", "use_communities", "optimize_query",
           "subqueries")


class QueryRequest(Record):
    """The body. The options apply to the modes whose service takes them (graph:
    entity/triple limits, subgraph size, path length; document: doc_limit; both:
    optimize_query, subqueries; lazy: max_hops, max_entities, use_communities); left
    out, the service's defaults apply."""

    query: str = Field(min_length=1)
    stream: bool = False
    mode: Literal["document", "graph", "lazy"] = "document"
    flow: str = "default"
    user: str | None = None
    collection: str | None = None
    optimize_query: bool = False
    subqueries: bool = False
    entity_limit: int | None = None
    triple_limit: int | None = None
    max_subgraph_size: int | None = None
    max_path_length: int | None = None
    doc_limit: int | None = None
    max_hops: int | None = None
    max_entities: int | None = None
    use_communities: bool | None = None


# What the answers look like, for the OpenAPI document (a unit test holds the lines
# written below to these models, so the two cannot drift apart).

class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Usage(_Line):
    in_token: int | None
    out_token: int | None
    model: str | None


class MetadataLine(_Line):
    type: Literal["metadata"]
    sources: list[Source]
    optimized_query: str | None
    subqueries: list[str]
    request_id: str


class ContentLine(_Line):
    type: Literal["content"]
    delta: str


class DoneLine(_Line):
    type: Literal["done"]
    usage: Usage


class LazySubgraph(_Line):
    """LazyRAG's retrieval: the subgraph, its communities, the confidence that it
    answers the question and what it leaves out."""

    entities: list[LazyEntity] | None
    relationships: list[LazyRelationship] | None
    communities: list[LazyCommunity] | None
    confidence: float | None
    missing_info: list[str] | None
    generation_time_ms: float | None
    community_cache: Literal["hit", "miss"] | None  # null: communities not used


class LazyResult(LazySubgraph):
    """What a lazy-mode answer adds to ``done`` and to the collected answer: the
    subgraph it was written from and, when the LLM failed, ``summary_error`` in place
    of the answer's text."""

    summary_error: Error | None


class LazyDoneLine(DoneLine, LazyResult):
    pass


class ErrorLine(_Line):
    type: Literal["error"]
    message: str
    error_type: str


class CollectedAnswer(_Line):
    response: str
    sources: list[Source]
    optimized_query: str | None
    subqueries: list[str]
    request_id: str
    usage: Usage


class LazyCollectedAnswer(CollectedAnswer, LazyResult):
    pass


async def answer(dispatcher: Dispatcher, request: web.Request) -> web.StreamResponse:
    """The route: validate, ask the service, answer as NDJSON lines or one object."""
    query, row, record = parse(dispatcher, await json_body(request))
    REQUESTS.labels(row.name, "query").inc()
    return await respond(request, dispatcher, row, query.flow, record, query.stream)


async def respond(request: web.Request, dispatcher: Dispatcher, row: ServiceRow, flow: str,
                  record: Record, stream: bool,
                  collected: Callable[["AnswerLines"], Any] = lambda lines: lines.collected()
                  ) -> web.StreamResponse:
    """Ask ``row``'s service (``record`` asks it to stream); answer as NDJSON lines or,
    without ``stream``, one JSON object: ``collected(lines)`` once all have arrived."""
    lines = AnswerLines(new_request_id(), row.result_fields)
    async with aclosing(dispatcher.frames(row, flow, record, lines.request_id)) as frames:
        async with aclosing(lines.translate(frames)) as batches:
            if stream:
                return await streamed(request, batches, NDJSON, error_line)
            async for _ in batches:
                pass
    return web.json_response(collected(lines), dumps=_dumps)


def parse(dispatcher: Dispatcher, body: dict) -> tuple[QueryRequest, ServiceRow, Record]:
    """The query, the service row of its mode and the service's request record; a bad
    field is a 400 naming it, a mode whose service is off here a 404 saying so."""
    try:
        query = QueryRequest.model_validate(body)
    except ValidationError as error:
        raise bad_request(validation_message(error, where="")) from None
    row = dispatcher.resolve(MODES[query.mode], query.flow)
    for option in OPTIONS:
        # Given, and not just its default (clients send ``optimize_query: false``).
        given = getattr(query, option) != QueryRequest.model_fields[option].default
        if given and option not in row.request_model.model_fields:
            raise bad_request(f"{option}: not a parameter of mode {query.mode!r}")
    fields = {key: value for key, value in body.items() if key not in API_FIELDS}
    try:
        record = row.request_model.model_validate({**fields, "streaming": True})
    except ValidationError as error:
        raise bad_request(validation_message(error, where="")) from None
    return query, row, record


class AnswerLines:
    """One answer's records turned into the API's lines, keeping what ``done`` and the
    collected answer need. A record carrying ``error`` raises ``ServiceError``, which
    the caller turns into an HTTP status (nothing sent yet) or an ``error`` line."""

    def __init__(self, request_id: str, result_fields: tuple[str, ...] = ()) -> None:
        self.request_id = request_id
        self.metadata: dict[str, Any] | None = None
        self.parts: list[str] = []
        self.usage: dict[str, Any] = {"in_token": None, "out_token": None, "model": None}
        # the service's own result fields, from its final record (ServiceRow.result_fields)
        self.result: dict[str, Any] = dict.fromkeys(result_fields)

    async def translate(self, frames: AsyncIterator[list[Frame]]) -> AsyncIterator[list[Frame]]:
        async for batch in frames:
            lines: list[Frame] = []
            for data, final in batch:
                lines += self.lines(json.loads(data), final)
            if lines:
                yield lines

    def lines(self, record: dict[str, Any], final: bool) -> list[Frame]:
        if record.get("error"):
            raise ServiceError(Error.model_validate(record["error"]))
        self._count(record)
        lines: list[Frame] = []
        if self.metadata is None:  # first, even from a service that sent no metadata
            self.metadata = self._metadata(record)
            lines.append((_dumps(self.metadata).encode(), False))
        # A streamed delta is ``chunk``; a service that answered in one record anyway
        # (no ``message_type``) has the whole answer in ``response``.
        delta = record.get("chunk") if record.get("message_type") else record.get("response")
        if delta:
            self.parts.append(delta)
            lines.append((_dumps({"type": "content", "delta": delta}).encode(), False))
        if final:
            self.result = {key: record.get(key) for key in self.result}
            lines.append((_dumps({"type": "done", "usage": self.usage, **self.result}
                                 ).encode(), True))
        return lines

    def collected(self) -> dict[str, Any]:
        """``stream: false``: the whole answer as one object."""
        metadata = self.metadata or self._metadata({})
        return {"response": "".join(self.parts), "sources": metadata["sources"],
                "optimized_query": metadata["optimized_query"],
                "subqueries": metadata["subqueries"], "request_id": self.request_id,
                "usage": self.usage, **self.result}

    def _metadata(self, record: dict[str, Any]) -> dict[str, Any]:
        return {"type": "metadata", "sources": record.get("sources") or [],
                "optimized_query": record.get("optimized_query"),
                "subqueries": record.get("subqueries") or [],
                "request_id": self.request_id}

    def _count(self, record: dict[str, Any]) -> None:
        """Token counts are deltas (DESIGN §4): summed; the model is the last named."""
        for field in ("in_token", "out_token"):
            if record.get(field) is not None:
                self.usage[field] = (self.usage[field] or 0) + record[field]
        if record.get("model"):
            self.usage["model"] = record["model"]


def error_line(exception: BaseException) -> bytes:
    """A failure after the first line, as the last line: ``{"type": "error", ...}``."""
    error = failed(exception)
    return _dumps({"type": "error", "message": error.message,
                   "error_type": error.type}).encode()


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
