"""The core's part of the OpenAPI document: a path per service row (generated from the
table, so it cannot drift), the websocket and ``/metrics``. The document itself is put
together from every part by ``apis/openapi.py``."""
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from trustgraph.schema import ROLES

from .permissions import Permission
from .rest import GLOBAL_PATH, SERVICE_PATH
from .services import ServiceRow

SchemaMode = Literal["validation", "serialization"]
# The JSON-schema reference of each model shown (as a request body, or as an answer).
Refs = Mapping[tuple[Any, SchemaMode], dict[str, Any]]
REF = "#/components/schemas/{model}"
ERROR = {"content": {"application/json": {"schema": {"$ref": REF.format(model="GatewayError")}}}}


@dataclass(frozen=True)
class Document:
    """A part of the OpenAPI document: the models it shows, and its paths given
    their schema references."""

    models: tuple[tuple[type[BaseModel], SchemaMode], ...]
    paths: Callable[[Refs], dict[str, Any]]


def services_document(rows: Iterable[ServiceRow], flows: Iterable[str]) -> Document:
    """The service rows' paths, the websocket's and /metrics'."""
    rows, flows = list(rows), list(flows)

    def paths(refs: Refs) -> dict[str, Any]:
        described = {SERVICE_PATH.replace("{kind}", row.name): {"post": _service_operation(
            row, refs[(row.request_model, "validation")],
            refs[(row.response_model, "serialization")], flows)} for row in rows}
        # A service outside flows also at /api/v1/{kind}, as TrustGraph's client asks.
        outside = {GLOBAL_PATH.replace("{kind}", row.name): {"post": _service_operation(
            row, refs[(row.request_model, "validation")],
            refs[(row.response_model, "serialization")], None)}
            for row in rows if row.global_flow is not None}
        return {**described, **outside, **_fixed_paths(rows)}

    models: list[tuple[type[BaseModel], SchemaMode]] = [
        *((row.request_model, "validation") for row in rows),
        *((row.response_model, "serialization") for row in rows)]
    return Document(tuple(models), paths)


def _service_operation(row: ServiceRow, request: dict, response: dict,
                       flows: list[str] | None) -> dict:
    """``flows`` None: the operation at ``/api/v1/{kind}``, outside flows."""
    lines = {"type": "string", "description": f"one {row.response_model.__name__} per record"}
    defaults = "".join(f" Fields left out here mean {name}={value!r}."
                       for name, value in row.global_defaults.items()) if flows is None else ""
    return {
        "summary": f"{row.name} on a flow" if flows is not None else
                   f"{row.name} (outside flows, as TrustGraph's client asks)",
        "description": 'Without streaming: the final record. With "streaming": true or '
                       "Accept: application/x-ndjson: NDJSON, one record per line; "
                       f"Accept: text/event-stream: SSE data events.{defaults} "
                       f"{_who_may(row)}",
        # the row's roles, by operation ("*": the service has one)
        "x-roles": {operation or "*": _roles(needs)
                    for operation, needs in row.permissions().items()},
        "parameters": [_flow_parameter(row, flows)] if flows is not None else [],
        "requestBody": {"required": True,
                        "content": {"application/json": {"schema": request}}},
        "responses": {
            "200": {"description": "the response", "content": {
                "application/json": {"schema": response},
                "application/x-ndjson": {"schema": lines},
                "text/event-stream": {"schema": lines}}},
            "400": {"description": "bad request (the message names the field)", **ERROR},
            "401": {"description": "missing or wrong token", **ERROR},
            "403": {"description": "the caller's role may not (x-roles), or it names "
                                   "another user", **ERROR},
            "404": {"description": "unknown flow or service", **ERROR},
            "502": {"description": "the service failed: its final record, with error",
                    "content": {"application/json": {"schema": response}}},
            "504": {"description": "the service sent nothing for too long", **ERROR},
        },
    }


def _who_may(row: ServiceRow) -> str:
    """The row's permissions as a sentence: who may, by operation."""
    by_roles: dict[tuple[str, ...], list[str]] = {}
    for operation, needs in row.permissions().items():
        roles = tuple(_roles(needs)) or ("nobody",)
        by_roles.setdefault(roles, []).append(operation or "")
    return "Who may: " + "; ".join(
        ", ".join(roles) + (f" ({', '.join(operations)})" if any(operations) else "")
        for roles, operations in by_roles.items()) + "."


def _roles(needs: Permission) -> list[str]:
    return [role for role in ROLES if role in needs.roles]


def _flow_parameter(row: ServiceRow, flows: list[str]) -> dict:
    if row.global_flow is not None:
        return {"name": "flow", "in": "path", "required": True, "schema": {"type": "string"},
                "description": f"any: {row.name} is outside flows (always flow "
                               f"{row.global_flow!r} on the bus)"}
    if not flows:  # the flows running change as they are started and stopped
        return {"name": "flow", "in": "path", "required": True, "schema": {"type": "string"},
                "description": "a running flow (tg-show-flows)"}
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
        "/metrics": {"get": {
            "summary": "Prometheus metrics", "security": [],
            "responses": {"200": {"description": "Prometheus text format",
                                  "content": {"text/plain": {}}}}}},
    }
