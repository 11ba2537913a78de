"""``POST /api/v1/query`` (also ``/query``): the answer-stream API (PROTOCOL §3).

One question in; the service of the chosen ``mode`` answers it (a RAG service,
LazyRAG, or the agent). The service is always asked to stream, whatever ``stream`` says: its
metadata record carries the sources, the rewritten question and the sub-questions,
so streamed and collected answers are the same code and say the same things. Its
records become the API's own lines: ``metadata``, ``content`` deltas (the agent's
thoughts, actions and observations as ``step`` lines among them), then ``done``
with the usage, or ``error`` instead of ``done``. ``stream: false`` collects them
into one JSON object.
"""
import json
from collections.abc import AsyncGenerator, AsyncIterable, Callable
from contextlib import aclosing
from dataclasses import asdict, dataclass
from typing import Any, Literal, get_args

from aiohttp import web
from pydantic import Field, ValidationError

from trustgraph.base import ServiceError
from trustgraph.schema import (
    Error,
    RagResponse,
    Record,
    Usage,
)
from trustgraph.schema.agent import Pattern

from ..core import (
    NDJSON,
    REF,
    REQUESTS,
    Caller,
    Core,
    Dispatcher,
    Document,
    Frame,
    Refs,
    ServiceRow,
    bad_request,
    failed,
    json_body,
    new_request_id,
    streamed,
    validation_message,
)
from .lines import (
    CollectedAgentAnswer,
    CollectedAnswer,
    ContentLine,
    DoneLine,
    ErrorLine,
    LazyCollectedAnswer,
    LazyDoneLine,
    MetadataLine,
    ProgressLine,
    StepKind,
    StepLine,
)

QUERY_PATHS = ("/api/v1/query", "/query")
# Fields of the API itself; everything else in the body belongs to the service request.
API_FIELDS = {"stream", "mode", "flow", "query"}
# Options only some modes' services take: given to another mode, a 400 naming them.
OPTIONS = ("entity_limit", "triple_limit", "max_subgraph_size", "max_path_length",
           "doc_limit", "max_hops", "max_entities", "use_communities", "optimize_query",
           "subqueries", "progress", "session_id", "group", "pattern", "max_iterations",
           "rerank")


class QueryRequest(Record):
    """The body. The options apply to the modes whose service takes them (graph:
    entity/triple limits, subgraph size, path length; document: doc_limit; both:
    optimize_query, subqueries; lazy: max_hops, max_entities, use_communities; agent:
    session_id, group, pattern, max_iterations); left out, the service's defaults
    apply."""

    query: str = Field(min_length=1)
    stream: bool = False
    mode: Literal["document", "graph", "lazy", "agent"] = "document"
    flow: str = "default"
    user: str | None = None
    collection: str | None = None
    optimize_query: bool = False
    subqueries: bool = False
    progress: bool = False  # ``{"type": "progress"}`` lines while retrieving (stream)
    entity_limit: int | None = None
    triple_limit: int | None = None
    max_subgraph_size: int | None = None
    max_path_length: int | None = None
    doc_limit: int | None = None
    rerank: bool = False  # document: reorder the chunks found through the LLM first
    session_id: str | None = None  # agent: the conversation to continue
    group: list[str] | None = None  # agent: only the tools of these groups
    pattern: Pattern | None = None  # agent: react or ask (default: the service's)
    max_iterations: int | None = None  # agent: the most reasoning steps
    max_hops: int | None = None
    max_entities: int | None = None
    use_communities: bool | None = None


def install(core: Core) -> None:
    async def answer(request: web.Request, caller: Caller) -> web.StreamResponse:
        """Validate, ask the service, answer as NDJSON lines or one object."""
        query, row, record = parse(core.client, await json_body(request))
        REQUESTS.labels(row.name, "query").inc()
        return await respond(request, core.client, caller, row, query.flow, record,
                             query.stream, MODES[query.mode].lines)

    for path in QUERY_PATHS:
        core.route("POST", path, answer)
    core.document(DOCUMENT)


async def respond(request: web.Request, dispatcher: Dispatcher, caller: Caller,
                  row: ServiceRow, flow: str, record: Record, stream: bool,
                  kind: type["AnswerLines"] | None = None,
                  collected: Callable[["AnswerLines"], Any] = lambda lines: lines.collected()
                  ) -> web.StreamResponse:
    """Ask ``row``'s service for ``caller`` (``record`` asks it to stream); answer as NDJSON lines
    (``kind``: how its records become lines) or, without ``stream``, one JSON object:
    ``collected(lines)`` once all have arrived."""
    lines = (kind or AnswerLines)(new_request_id(), result_fields(row))
    answer = dispatcher.frames(row, flow, record, lines.request_id, caller=caller)
    async with aclosing(answer) as frames:
        async with aclosing(lines.translate(frames)) as batches:
            if stream:
                return await streamed(request, batches, NDJSON, error_line)
            async for _ in batches:
                pass
    return web.json_response(collected(lines), dumps=_dumps)


def result_fields(row: ServiceRow) -> tuple[str, ...]:
    """What the answer's final record adds to ``done`` and the collected answer."""
    model = row.response_model
    return model.result_fields if issubclass(model, RagResponse) else ()


def parse(dispatcher: Dispatcher, body: dict) -> tuple[QueryRequest, ServiceRow, Record]:
    """The query, the service row of its mode and the service's request record; a bad
    field is a 400 naming it, a mode whose service is off here a 404 saying so."""
    try:
        query = QueryRequest.model_validate(body)
    except ValidationError as error:
        raise bad_request(validation_message(error, where="")) from None
    mode = MODES[query.mode]
    row = dispatcher.resolve(mode.service, query.flow)
    for option in OPTIONS:
        # Given, and not just its default (clients send ``optimize_query: false``).
        given = getattr(query, option) != QueryRequest.model_fields[option].default
        if given and option not in row.request_model.model_fields:
            raise bad_request(f"{option}: not a parameter of mode {query.mode!r}")
    fields = {key: value for key, value in body.items() if key not in API_FIELDS}
    return query, row, dispatcher.prepare(
        row, {**fields, mode.question: query.query, "streaming": True}, where="")


class AnswerLines:
    """One answer's records turned into the API's lines, keeping what ``done`` and the
    collected answer need. A record carrying ``error`` raises ``ServiceError``, which
    the caller turns into an HTTP status (nothing sent yet) or an ``error`` line."""

    def __init__(self, request_id: str, result_fields: tuple[str, ...] = ()) -> None:
        self.request_id = request_id
        self.metadata: dict[str, Any] | None = None
        self.parts: list[str] = []
        self.usage = Usage()
        # the service's own result fields, from its final record (``result_fields``)
        self.result: dict[str, Any] = dict.fromkeys(result_fields)

    async def translate(self, frames: AsyncIterable[list[Frame]]
                        ) -> AsyncGenerator[list[Frame], None]:
        async for batch in frames:
            lines: list[Frame] = []
            try:
                for data, final in batch:
                    lines += self.lines(json.loads(data), final)
            except ServiceError:
                # An error that arrived with the deltas before it (one batch, when
                # this process was busy) comes after their lines, not instead.
                if lines:
                    yield lines
                raise
            if lines:
                yield lines

    def lines(self, record: dict[str, Any], final: bool) -> list[Frame]:
        if record.get("message_type") == "progress" and not record.get("error"):
            # opt-in; before the metadata
            return [(_dumps({"type": "progress", "message": record.get("progress")}).encode(),
                     False)]
        lines = self._opening(record)
        # A streamed delta is ``chunk``; a service that answered in one record anyway
        # (no ``message_type``) has the whole answer in ``response``.
        delta = record.get("chunk") if record.get("message_type") else record.get("response")
        if delta:
            lines.append(self._content(delta))
        if final:
            self.result = {key: record.get(key) for key in self.result}
            lines.append(self._done())
        return lines

    def collected(self) -> dict[str, Any]:
        """``stream: false``: the whole answer as one object."""
        metadata = self.metadata or self._metadata({})
        return {"response": "".join(self.parts), "sources": metadata["sources"],
                "optimized_query": metadata["optimized_query"],
                "subqueries": metadata["subqueries"], "request_id": self.request_id,
                "usage": asdict(self.usage), **self.result}

    def _opening(self, record: dict[str, Any]) -> list[Frame]:
        """Any record: raise its error, count its tokens; before the first, the
        metadata line (even for a service that sent no metadata)."""
        if record.get("error"):
            raise ServiceError(Error.model_validate(record["error"]))
        self._count(record)
        if self.metadata is not None:
            return []
        self.metadata = self._metadata(record)
        return [(_dumps(self.metadata).encode(), False)]

    def _content(self, delta: str) -> Frame:
        self.parts.append(delta)
        return _dumps({"type": "content", "delta": delta}).encode(), False

    def _done(self) -> Frame:
        return _dumps({"type": "done", "usage": asdict(self.usage), **self.result}
                      ).encode(), True

    def _metadata(self, record: dict[str, Any]) -> dict[str, Any]:
        return {"type": "metadata", "sources": record.get("sources") or [],
                "optimized_query": record.get("optimized_query"),
                "subqueries": record.get("subqueries") or [],
                "request_id": self.request_id}

    def _count(self, record: dict[str, Any]) -> None:
        """Token counts are deltas (DESIGN §4): summed; the model is the last named."""
        self.usage.add(Usage.of(record))


STEP_KINDS = frozenset(get_args(StepKind))


class AgentLines(AnswerLines):
    """Mode agent: the dialog's thoughts, actions and observations become ``step``
    lines, its answer ``content`` lines; ``done`` also names the session. Collected,
    the steps are whole messages (their deltas joined) before the answer."""

    def __init__(self, request_id: str, result_fields: tuple[str, ...] = ()) -> None:
        super().__init__(request_id, result_fields)
        self.session_id: str | None = None
        self.sources: list[Any] = []
        self.steps: list[dict[str, Any]] = []
        self._open = False  # the last step is still receiving deltas

    def lines(self, record: dict[str, Any], final: bool) -> list[Frame]:
        lines = self._opening(record)
        kind: str = record.get("chunk_type") or ""
        content: str = record.get("content") or ""
        if kind == "error":  # an error frame without ``error``: still the dialog's end
            raise ServiceError(Error(type="agent-error", message=content or "agent failed"))
        self.session_id = record.get("session_id") or self.session_id
        self.sources = record.get("sources") or self.sources
        if kind == "answer" and content:
            lines.append(self._content(content))
        elif kind in STEP_KINDS and (content or kind == "action"):
            lines.append(self._step(kind, content, record))
        if final:
            lines.append(self._done())
        return lines

    def _step(self, kind: str, content: str, record: dict[str, Any]) -> Frame:
        action = {field: record[field] for field in ("tool", "arguments")
                  if record.get(field) is not None}
        if self._open and self.steps[-1]["chunk_type"] == kind:
            self.steps[-1]["content"] += content
        else:
            self.steps.append({"chunk_type": kind, "content": content, **action})
        self._open = not record.get("end_of_message")
        return _dumps({"type": "step", "chunk_type": kind, "delta": content,
                       **action}).encode(), False

    def _done(self) -> Frame:
        return _dumps({"type": "done", "usage": asdict(self.usage),
                       "session_id": self.session_id}).encode(), True

    def collected(self) -> dict[str, Any]:
        return {"response": "".join(self.parts), "steps": self.steps,
                "sources": self.sources, "request_id": self.request_id,
                "session_id": self.session_id, "usage": asdict(self.usage)}


@dataclass(frozen=True)
class Mode:
    service: str
    question: str = "query"  # the field of the service's request that holds the question
    lines: type[AnswerLines] = AnswerLines


MODES = {"document": Mode("document-rag"), "graph": Mode("graph-rag"),
         "lazy": Mode("lazy-rag"), "agent": Mode("agent", "question", AgentLines)}


def error_line(exception: BaseException) -> bytes:
    """A failure after the first line, as the last line: ``{"type": "error", ...}``."""
    error = failed(exception)
    return _dumps({"type": "error", "message": error.message,
                   "error_type": error.type}).encode()


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --- the OpenAPI document --------------------------------------------------------------

# The lines, then the collected answers (graph/document, lazy, agent).
LINES = (MetadataLine, ProgressLine, ContentLine, StepLine, DoneLine, LazyDoneLine, ErrorLine)
COLLECTED = (CollectedAnswer, LazyCollectedAnswer, CollectedAgentAnswer)


def _paths(refs: Refs) -> dict[str, Any]:
    error = {"content": {"application/json": {"schema": {"$ref": REF.format(
        model="GatewayError")}}}}
    operation = {
        "summary": "ask a question of the documents (mode document), the graph (graph) "
                   "the graph summarised at query time (lazy) or the agent (agent)",
        "description": 'With "stream": true, NDJSON lines: one metadata line (sources, '
                       "the rewritten question, sub-questions, request_id), content lines "
                       "(answer deltas), then done (with usage; in mode lazy also the "
                       "subgraph, communities, confidence and missing information) or, on "
                       "failure, error instead of done. Mode agent adds step lines (its "
                       "thoughts, actions and observations) before and between the content "
                       'lines, and done names the session. With "stream": false, one JSON '
                       "object. A dropped connection cancels the request (and its LLM "
                       "stream).",
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": refs[(QueryRequest, "validation")]}}},
        "responses": {
            "200": {"description": "the answer", "content": {
                "application/json": {"schema": {
                    "oneOf": [refs[(model, "serialization")] for model in COLLECTED],
                    "description": "CollectedAgentAnswer for mode agent, "
                                   "LazyCollectedAnswer for mode lazy, else CollectedAnswer"}},
                "application/x-ndjson": {"schema": {
                    "oneOf": [refs[(model, "serialization")] for model in LINES],
                    "description": "one of these per line"}}}},
            "400": {"description": "bad request (the message names the field)", **error},
            "401": {"description": "missing or wrong token", **error},
            "404": {"description": "unknown flow, or mode lazy while LazyRAG is off "
                                   "(the message says how to enable it)", **error},
            "502": {"description": "the service failed before answering", **error},
            "503": {"description": "no service took the request, or it is overloaded",
                    **error},
            "504": {"description": "the service sent nothing for too long", **error},
        },
    }
    return {path: {"post": operation} for path in QUERY_PATHS}


DOCUMENT = Document(((QueryRequest, "validation"),
                     *((model, "serialization") for model in LINES + COLLECTED)), _paths)
