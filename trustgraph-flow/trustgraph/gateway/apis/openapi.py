"""``GET /api/v1/openapi.json``: the OpenAPI document, put together from the parts the
core and every API module declared (``core.document``), so it cannot drift from what
is served. Built once, on the first request, when every module has declared its part."""
from functools import cache
from typing import Any

from aiohttp import web
from pydantic.json_schema import models_json_schema

from ..core import REF, Caller, Core, Document

_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {
    "type": "object", "required": ["type", "message"],
    "properties": {"type": {"type": "string"}, "message": {"type": "string"}}}}}
_THIS = {"/api/v1/openapi.json": {"get": {
    "summary": "this document", "security": [],
    "responses": {"200": {"description": "OpenAPI 3.1"}}}}}


def install(core: Core) -> None:
    @cache
    def document() -> dict[str, Any]:
        return openapi(core.documents)

    async def serve(request: web.Request, caller: Caller) -> web.Response:
        return web.json_response(document())

    core.route("GET", "/api/v1/openapi.json", serve, public=True)


def openapi(parts: list[Document]) -> dict[str, Any]:
    refs, schemas = models_json_schema(
        [model for part in parts for model in part.models], ref_template=REF)
    paths: dict[str, Any] = {}
    for part in parts:
        paths.update(part.paths(refs))
    return {
        "openapi": "3.1.0",
        "info": {"title": "TrustGraph gateway", "version": "1"},
        "paths": {**paths, **_THIS},
        "components": {
            "schemas": {**schemas.get("$defs", {}), "GatewayError": _ERROR},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],
    }
