"""``POST /api/v1/query`` (also ``/query``): the answer-stream API (PROTOCOL §3).

One question in; the RAG service of the chosen ``mode`` answers it. The service is
always asked to stream, whatever ``stream`` says: its metadata record carries the
sources, the rewritten question and the sub-questions, so streamed and collected
answers are the same code and say the same things. Its records become the API's own
lines: ``metadata``, ``content`` deltas, then ``done`` with the usage, or ``error``
instead of ``done``. ``stream: false`` collects them into one JSON object.
"""
import json
from dataclasses import asdict
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trustgraph.base import ServiceError
from trustgraph.schema import Error, Record, Source, Usage

from .dispatch import Dispatcher, new_request_id
from .errors import GatewayError, bad_request, validation_message
from .framing import Frame
from .metrics import REQUESTS
from .responses import NDJSON, failed, json_body, streamed
from .services import SERVICES, ServiceRow

QUERY_PATHS = ("/api/v1/query", "/query")
MODES = {"document": "document-rag", "graph": "graph-rag", "lazy": "lazy-rag"}
# Fields of the API itself; everything else in the body belongs to the service request.
API_FIELDS = {"stream", "mode", "flow"}
LIMITS = ("entity_limit", "triple_limit", "max_subgraph_size", "max_path_length", "doc_limit")


class QueryRequest(Record):
    """The body. The RAG limits apply to the modes whose service takes them (graph:
    entity/triple limits, subgraph size, path length; document: doc_limit); left out,
    the service's defaults apply."""

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


# What the answers look like, for the OpenAPI document (a unit test holds the lines
# written below to these models, so the two cannot drift apart).

class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UsageLine(_Line):
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
    usage: UsageLine


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
    usage: UsageLine


async def answer(dispatcher: Dispatcher, request: web.Request) -> web.StreamResponse:
    """The route: validate, ask the service, answer as NDJSON lines or one object."""
    query, row, record = parse(dispatcher, await json_body(request))
    REQUESTS.labels(row.name, "query").inc()
    request_id = new_request_id()
    lines = AnswerLines(request_id)
    async with aclosing(dispatcher.frames(row, query.flow, record, request_id)) as frames:
        async with aclosing(lines.translate(frames)) as batches:
            if query.stream:
                return await streamed(request, batches, NDJSON, error_line)
            async for _ in batches:
                pass
    return web.json_response(lines.collected(), dumps=_dumps)


def parse(dispatcher: Dispatcher, body: dict) -> tuple[QueryRequest, ServiceRow, Record]:
    """The query, the service row of its mode and the service's request record; a bad
    field is a 400 naming it, a mode with no service here a 404 saying so."""
    try:
        query = QueryRequest.model_validate(body)
    except ValidationError as error:
        raise bad_request(validation_message(error, where="")) from None
    row = SERVICES.get(MODES[query.mode])
    if row is None:
        raise GatewayError("mode-unavailable", f"mode: {query.mode!r} is not available yet "
                           f"(this gateway has no {MODES[query.mode]} service); use "
                           f"'document' or 'graph'", 404)
    dispatcher.resolve(row.name, query.flow)
    for limit in LIMITS:
        if limit in query.model_fields_set and limit not in row.request_model.model_fields:
            raise bad_request(f"{limit}: not a parameter of mode {query.mode!r}")
    fields = {key: value for key, value in body.items() if key not in API_FIELDS}
    return query, row, dispatcher.prepare(row, {**fields, "streaming": True}, where="")


class AnswerLines:
    """One answer's records turned into the API's lines, keeping what ``done`` and the
    collected answer need. A record carrying ``error`` raises ``ServiceError``, which
    the caller turns into an HTTP status (nothing sent yet) or an ``error`` line."""

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self.metadata: dict[str, Any] | None = None
        self.parts: list[str] = []
        self.usage = Usage()

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
            lines.append((_dumps({"type": "done", "usage": asdict(self.usage)}).encode(), True))
        return lines

    def collected(self) -> dict[str, Any]:
        """``stream: false``: the whole answer as one object."""
        metadata = self.metadata or self._metadata({})
        return {"response": "".join(self.parts), "sources": metadata["sources"],
                "optimized_query": metadata["optimized_query"],
                "subqueries": metadata["subqueries"], "request_id": self.request_id,
                "usage": asdict(self.usage)}

    def _metadata(self, record: dict[str, Any]) -> dict[str, Any]:
        return {"type": "metadata", "sources": record.get("sources") or [],
                "optimized_query": record.get("optimized_query"),
                "subqueries": record.get("subqueries") or [],
                "request_id": self.request_id}

    def _count(self, record: dict[str, Any]) -> None:
        """Token counts are deltas (DESIGN §4): summed; the model is the last named."""
        self.usage.add(Usage.of(record))


def error_line(exception: BaseException) -> bytes:
    """A failure after the first line, as the last line: ``{"type": "error", ...}``."""
    error = failed(exception)
    return _dumps({"type": "error", "message": error.message,
                   "error_type": error.type}).encode()


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
