"""``GET /api/v1/openapi.json``: generated from the service table, so it cannot drift."""
from collections.abc import Iterable

from pydantic.json_schema import models_json_schema

from .answers import (
    QUERY_PATHS,
    CollectedAgentAnswer,
    CollectedAnswer,
    ContentLine,
    DoneLine,
    ErrorLine,
    LazyCollectedAnswer,
    LazyDoneLine,
    MetadataLine,
    ProgressLine,
    QueryRequest,
    StepLine,
)
from .lazy_rag import (
    LAZY_RAG_PATH,
    LazyAnswerEnvelope,
    LazyExpandBody,
    LazyExpandEnvelope,
    LazyQueryBody,
    LazyStatusEnvelope,
)
from .services import ServiceRow

_REF = "#/components/schemas/{model}"
_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {
    "type": "object", "required": ["type", "message"],
    "properties": {"type": {"type": "string"}, "message": {"type": "string"}}}}}


# The answer-stream lines, then the collected answers (graph/document, lazy, agent).
_LINES = (MetadataLine, ProgressLine, ContentLine, StepLine, DoneLine, LazyDoneLine, ErrorLine)
_COLLECTED = (CollectedAnswer, LazyCollectedAnswer, CollectedAgentAnswer)
_LAZY = (LazyQueryBody, LazyExpandBody)
_LAZY_ANSWERS = (LazyAnswerEnvelope, LazyExpandEnvelope, LazyStatusEnvelope)


def openapi(rows: Iterable[ServiceRow], flows: Iterable[str]) -> dict:
    rows = list(rows)
    refs, schemas = models_json_schema(
        [(row.request_model, "validation") for row in rows]
        + [(row.response_model, "serialization") for row in rows]
        + [(QueryRequest, "validation")]
        + [(model, "serialization") for model in _LINES + _COLLECTED]
        + [(model, "validation") for model in _LAZY]
        + [(model, "serialization") for model in _LAZY_ANSWERS],
        ref_template=_REF)
    paths = {f"/api/v1/flow/{{flow}}/service/{row.name}": {"post": _service_operation(
        row, refs[(row.request_model, "validation")],
        refs[(row.response_model, "serialization")], list(flows))} for row in rows}
    query = _query_operation(refs[(QueryRequest, "validation")],
                             [refs[(model, "serialization")] for model in _LINES],
                             [refs[(model, "serialization")] for model in _COLLECTED])
    paths.update({path: {"post": query} for path in QUERY_PATHS})
    paths.update(_lazy_paths({model: refs[(model, "validation")] for model in _LAZY},
                             {model: refs[(model, "serialization")] for model in _LAZY_ANSWERS},
                             refs[(LazyDoneLine, "serialization")]))
    paths.update(_fixed_paths(rows))
    return {
        "openapi": "3.1.0",
        "info": {"title": "TrustGraph gateway", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": {**schemas.get("$defs", {}), "GatewayError": _ERROR},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],
    }


def _service_operation(row: ServiceRow, request: dict, response: dict, flows: list[str]
                       ) -> dict:
    error = {"content": {"application/json": {"schema": {"$ref": _REF.format(
        model="GatewayError")}}}}
    lines = {"type": "string", "description": f"one {row.response_model.__name__} per record"}
    return {
        "summary": f"{row.name} on a flow",
        "description": 'Without streaming: the final record. With "streaming": true or '
                       "Accept: application/x-ndjson: NDJSON, one record per line; "
                       "Accept: text/event-stream: SSE data events.",
        "parameters": [_flow_parameter(row, flows)],
        "requestBody": {"required": True,
                        "content": {"application/json": {"schema": request}}},
        "responses": {
            "200": {"description": "the response", "content": {
                "application/json": {"schema": response},
                "application/x-ndjson": {"schema": lines},
                "text/event-stream": {"schema": lines}}},
            "400": {"description": "bad request (the message names the field)", **error},
            "401": {"description": "missing or wrong token", **error},
            "404": {"description": "unknown flow or service", **error},
            "502": {"description": "the service failed: its final record, with error",
                    "content": {"application/json": {"schema": response}}},
            "504": {"description": "the service sent nothing for too long", **error},
        },
    }


def _query_operation(request: dict, lines: list[dict], collected: list[dict]) -> dict:
    error = {"content": {"application/json": {"schema": {"$ref": _REF.format(
        model="GatewayError")}}}}
    return {
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
        "requestBody": {"required": True, "content": {"application/json": {"schema": request}}},
        "responses": {
            "200": {"description": "the answer", "content": {
                "application/json": {"schema": {
                    "oneOf": collected, "description": "CollectedAgentAnswer for mode agent, "
                                                       "LazyCollectedAnswer for mode lazy, "
                                                       "else CollectedAnswer"}},
                "application/x-ndjson": {"schema": {
                    "oneOf": lines, "description": "one of these per line"}}}},
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


def _lazy_paths(bodies: dict, answers: dict, done: dict) -> dict:
    """``/api/v1/lazy-rag/{query,expand,status}``, answering in the seed's envelope."""
    query, expand = bodies.values()
    answer, expansion, status = answers.values()
    lines = {"oneOf": [{"$ref": _REF.format(model=name)} for name in (
        "MetadataLine", "ContentLine", "ErrorLine")] + [done],
        "description": "one of these per line, as /api/v1/query in mode lazy"}
    return {
        f"{LAZY_RAG_PATH}/query": {"post": _lazy_operation(
            "LazyRAG: an answer summarised now from the subgraph the question touches",
            'Without "stream": one result in {"data", "meta"}; when the LLM fails, '
            "data.summary is null and data.summary_error says why, the subgraph, "
            'confidence and missing_info still there. With "stream": true, NDJSON lines.',
            query, {"application/json": {"schema": answer},
                    "application/x-ndjson": {"schema": lines}})},
        f"{LAZY_RAG_PATH}/expand": {"post": _lazy_operation(
            "LazyRAG's retrieval alone (no LLM)", "The subgraph, its communities, the "
            "confidence and the missing information, in {\"data\", \"meta\"}.",
            expand, {"application/json": {"schema": expansion}})},
        f"{LAZY_RAG_PATH}/status": {"get": {
            **_lazy_operation(
                "LazyRAG's settings in force and community cache",
                "Answers even while LazyRAG is off: enabled false, the LAZY_RAG_* settings "
                "of the gateway's environment, and a message saying how to enable it.",
                None, {"application/json": {"schema": status}}),
            "parameters": [{"name": name, "in": "query", "required": False,
                            "schema": {"type": "string"}}
                           for name in ("user", "collection", "flow")]}},
    }


def _lazy_operation(summary: str, description: str, body: dict | None, content: dict
                    ) -> dict:
    error = {"content": {"application/json": {"schema": {"$ref": _REF.format(
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
    operation = {"summary": summary, "description": description, "responses": responses}
    if body is not None:
        operation["requestBody"] = {"required": True,
                                    "content": {"application/json": {"schema": body}}}
    return operation


def _flow_parameter(row: ServiceRow, flows: list[str]) -> dict:
    if row.global_flow is not None:
        return {"name": "flow", "in": "path", "required": True, "schema": {"type": "string"},
                "description": f"any: {row.name} is outside flows (always flow "
                               f"{row.global_flow!r} on the bus)"}
    return {"name": "flow", "in": "path", "required": True,
            "schema": {"type": "string", "enum": flows}}


def _fixed_paths(rows: list[ServiceRow]) -> dict:
    names = ", ".join(row.name for row in rows)
    return {
        "/api/v1/socket": {"get": {
            "summary": "websocket carrying many concurrent requests",
            "description": 'Client frames: {"id", "service", "flow"?, "request"}, '
                           '{"type": "auth", "token"}, {"type": "cancel", "id"}. Server '
                           'frames: {"id", "response", "complete"} or {"id", "error", '
                           f'"complete": true}}. Services: {names}.',
            "responses": {"101": {"description": "switching to the websocket protocol"}}}},
        "/api/v1/openapi.json": {"get": {
            "summary": "this document", "security": [],
            "responses": {"200": {"description": "OpenAPI 3.1"}}}},
        "/metrics": {"get": {
            "summary": "Prometheus metrics", "security": [],
            "responses": {"200": {"description": "Prometheus text format",
                                  "content": {"text/plain": {}}}}}},
    }
