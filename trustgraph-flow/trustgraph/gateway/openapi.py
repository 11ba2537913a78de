"""``GET /api/v1/openapi.json``: generated from the service table, so it cannot drift."""
from collections.abc import Iterable

from pydantic.json_schema import models_json_schema

from .answers import (QUERY_PATHS, CollectedAgentAnswer, CollectedAnswer, ContentLine,
                      DoneLine, ErrorLine, MetadataLine, QueryRequest, StepLine)
from .services import ServiceRow

_REF = "#/components/schemas/{model}"
_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {
    "type": "object", "required": ["type", "message"],
    "properties": {"type": {"type": "string"}, "message": {"type": "string"}}}}}


_LINES = (MetadataLine, ContentLine, StepLine, DoneLine, ErrorLine)
_COLLECTED = (CollectedAnswer, CollectedAgentAnswer)


def openapi(rows: Iterable[ServiceRow], flows: Iterable[str]) -> dict:
    rows = list(rows)
    refs, schemas = models_json_schema(
        [(row.request_model, "validation") for row in rows]
        + [(row.response_model, "serialization") for row in rows]
        + [(QueryRequest, "validation")]
        + [(model, "serialization") for model in _LINES + _COLLECTED],
        ref_template=_REF)
    paths = {f"/api/v1/flow/{{flow}}/service/{row.name}": {"post": _service_operation(
        row, refs[(row.request_model, "validation")],
        refs[(row.response_model, "serialization")], list(flows))} for row in rows}
    query = _query_operation(refs[(QueryRequest, "validation")],
                             [refs[(model, "serialization")] for model in _LINES],
                             [refs[(model, "serialization")] for model in _COLLECTED])
    paths.update({path: {"post": query} for path in QUERY_PATHS})
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
                   "or the agent (agent)",
        "description": 'With "stream": true, NDJSON lines: one metadata line (sources, '
                       "the rewritten question, sub-questions, request_id), content lines "
                       "(answer deltas), then done (with usage) or, on failure, error "
                       "instead of done. Mode agent adds step lines (its thoughts, actions "
                       "and observations) before and between the content lines, and done "
                       'names the session. With "stream": false, one JSON object. A '
                       "dropped connection cancels the request (and its LLM stream).",
        "requestBody": {"required": True, "content": {"application/json": {"schema": request}}},
        "responses": {
            "200": {"description": "the answer", "content": {
                "application/json": {"schema": {
                    "oneOf": collected, "description": "CollectedAgentAnswer for mode "
                                                       "agent, else CollectedAnswer"}},
                "application/x-ndjson": {"schema": {
                    "oneOf": lines, "description": "one of these per line"}}}},
            "400": {"description": "bad request (the message names the field)", **error},
            "401": {"description": "missing or wrong token", **error},
            "404": {"description": "unknown flow, or a mode this gateway has no service "
                                   "for (lazy)", **error},
            "502": {"description": "the service failed before answering", **error},
            "503": {"description": "no service took the request, or it is overloaded",
                    **error},
            "504": {"description": "the service sent nothing for too long", **error},
        },
    }


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
