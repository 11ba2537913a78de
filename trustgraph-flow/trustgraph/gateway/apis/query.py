"""``POST /api/v1/query`` (also ``/query``): the answer-stream API (PROTOCOL §3).

One question in; the service of the chosen ``mode`` answers it (a RAG service,
LazyRAG, or the agent). The service is always asked to stream, whatever ``stream`` says: its
metadata record carries the sources, the rewritten question and the sub-questions,
so streamed and collected answers are the same code and say the same things. Its
answer, read as events (``asking``), is rendered as the API's own lines
(``lines.Lines``): ``metadata``, ``content`` deltas (the agent's thoughts, actions
and observations as ``step`` lines among them), then ``done`` with the usage (and the
service's own result), or ``error`` instead of ``done``. ``stream: false`` collects
them into one JSON object (``lines.collected_answer``).
"""
import json
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Literal, get_args

from aiohttp import web
from pydantic import BaseModel, Field, ValidationError

from trustgraph.answers import Reader
from trustgraph.schema import Record
from trustgraph.schema.agent import Pattern

from ..core import (
    NDJSON,
    REF,
    REQUESTS,
    SERVICES,
    Caller,
    Core,
    Dispatcher,
    Document,
    Refs,
    ServiceRow,
    bad_request,
    failed,
    json_body,
    new_request_id,
    streamed,
    validation_message,
)
from .asking import collected, read, rendered
from .collected import Collected
from .lines import (
    ContentLine,
    ErrorLine,
    Lines,
    MetadataLine,
    ProgressLine,
    StepLine,
    collected_answer,
    collected_model,
    done_model,
)
from .lines import error_line as line_of_error

QUERY_PATHS = ("/api/v1/query", "/query")
# Fields of the API itself; everything else in the body belongs to the service request.
API_FIELDS = {"stream", "mode", "flow", "query"}
# Options only some modes' services take: given to another mode, a 400 naming them.
OPTIONS = ("entity_limit", "triple_limit", "max_subgraph_size", "max_path_length",
           "doc_limit", "max_hops", "max_entities", "use_communities", "optimize_query",
           "subqueries", "progress", "session_id", "group", "pattern", "max_iterations",
           "rerank")


QueryMode = Literal["document", "graph", "lazy", "agent"]
QUERY_MODES: dict[str, QueryMode] = {mode: mode for mode in get_args(QueryMode)}


class QueryRequest(Record):
    """The body. The options apply to the modes whose service takes them (graph:
    entity/triple limits, subgraph size, path length; document: doc_limit; both:
    optimize_query, subqueries; lazy: max_hops, max_entities, use_communities; agent:
    session_id, group, pattern, max_iterations); left out, the service's defaults
    apply."""

    query: str = Field(min_length=1)
    stream: bool = False
    mode: QueryMode = "document"  # unset: the flow's retrieval-mode parameter
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
                             query.stream)

    for path in QUERY_PATHS:
        core.route("POST", path, answer)
    core.document(DOCUMENT)


# The collected answer, given the whole answer and the request's id.
Collect = Callable[[Collected, str], dict[str, Any]]


async def respond(request: web.Request, dispatcher: Dispatcher, caller: Caller,
                  row: ServiceRow, flow: str, record: Record, stream: bool,
                  collect: Collect | None = None) -> web.StreamResponse:
    """Ask ``row``'s service for ``caller`` (``record`` asks it to stream); answer
    with its events as NDJSON lines (``Lines``) or, without ``stream``, one JSON
    object: ``collect(whole, request_id)`` (by default the collected answer of
    ``row``'s response model) once all have arrived."""
    request_id = new_request_id()
    model = row.response_model
    frames, reader = dispatcher.frames(row, flow, record, request_id, caller=caller), \
        Reader(model)
    if stream:
        async with aclosing(rendered(frames, reader, Lines(request_id, model).render)) \
                as batches:
            return await streamed(request, batches, NDJSON, error_line)
    whole = await collected(read(frames, reader))
    body = collect(whole, request_id) if collect is not None \
        else collected_answer(whole, model, request_id)
    return web.json_response(body, dumps=_dumps)


def parse(dispatcher: Dispatcher, body: dict) -> tuple[QueryRequest, ServiceRow, Record]:
    """The query, the service row of its mode and the service's request record; a bad
    field is a 400 naming it, a mode whose service is off here a 404 saying so."""
    try:
        query = QueryRequest.model_validate(body)
    except ValidationError as error:
        raise bad_request(validation_message(error, where="")) from None
    if "mode" not in query.model_fields_set:
        query.mode = flow_mode(dispatcher, query.flow)
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


def flow_mode(dispatcher: Dispatcher, flow: str) -> QueryMode:
    """The mode a question naming none is asked in: its flow's ``retrieval-mode``."""
    mode = dispatcher.flows.parameters(flow).get("retrieval-mode")
    return QUERY_MODES.get(mode, "document") if isinstance(mode, str) else "document"


@dataclass(frozen=True)
class Mode:
    service: str
    question: str = "query"  # the field of the service's request that holds the question


MODES = {"document": Mode("document-rag"), "graph": Mode("graph-rag"),
         "lazy": Mode("lazy-rag"), "agent": Mode("agent", "question")}


def error_line(exception: BaseException) -> bytes:
    """A failure after the first line, as the last line: ``{"type": "error", ...}``."""
    error = failed(exception)
    return line_of_error(error.message, error.type)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --- the OpenAPI document --------------------------------------------------------------

# The lines (``done`` as each mode's service ends it), then each mode's collected answer.
_MODELS = tuple(dict.fromkeys(SERVICES[mode.service].response_model for mode in MODES.values()))
LINES: tuple[type[BaseModel], ...] = (
    MetadataLine, ProgressLine, ContentLine, StepLine,
    *dict.fromkeys(done_model(model) for model in _MODELS), ErrorLine)
COLLECTED: tuple[type[BaseModel], ...] = tuple(
    dict.fromkeys(collected_model(model) for model in _MODELS))


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
                    "description": "as the mode's service answers: with its steps "
                                   "(mode agent) or its own result (mode lazy)"}},
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
