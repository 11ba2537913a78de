"""Anthropic Messages wire format: SSE events ``message_start`` (input tokens),
``content_block_start``, ``ping``, ``content_block_delta`` (``text_delta``) per token,
``content_block_stop``, ``message_delta`` (output tokens), ``message_stop``; errors as
an ``error`` event, or an HTTP status with Anthropic's JSON error body. A request
forcing a tool (``tool_choice`` ``{"type": "tool"}``: how a schema is asked for) is
answered with that tool's input instead: a ``tool_use`` block whose JSON streams as
``input_json_delta`` pieces, stopping with ``tool_use``. Also Claude on Vertex AI: the
same stream behind Vertex's ``:streamRawPredict`` path."""
import contextvars
import json

from aiohttp import web

from .scripted_llm import PROMPT_TOKENS, Script, ScriptedServer, expected_text  # noqa: F401

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
               403: "permission_error", 404: "not_found_error", 413: "request_too_large",
               429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}

_forced = contextvars.ContextVar("forced_tool", default=False)  # this request's answer


class AnthropicServer(ScriptedServer):
    model = "fake-claude"
    stream_error_type = "api_error"  # the ``error`` event's type for fail_after

    @property
    def base_url(self) -> str:
        return self.url

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self.handle)

    def options(self, body: dict) -> dict:
        return {"model": body.get("model"), "max_tokens": body.get("max_tokens"),
                "temperature": body.get("temperature"), "stop": body.get("stop_sequences")}

    def shape(self, body: dict) -> dict | None:
        """The ``input_schema`` of the tool ``tool_choice`` forces."""
        tool = self._forced_tool(body)
        return None if tool is None else {"mechanism": "forced tool input_schema",
                                          "schema": tool["input_schema"]}

    async def handle(self, request: web.Request, body: dict | None = None
                     ) -> web.StreamResponse:
        body = body if body is not None else await request.json()
        _forced.set(self._forced_tool(body) is not None)
        return await super().handle(request, body)

    @staticmethod
    def _forced_tool(body: dict) -> dict | None:
        choice = body.get("tool_choice") or {}
        if choice.get("type") != "tool":
            return None
        return next(tool for tool in body.get("tools", ()) if tool["name"] == choice["name"])

    def prompt_text(self, body: dict) -> str:
        parts = [body.get("system") or ""]
        for message in body.get("messages", []):
            content = message.get("content", "")
            parts += [content] if isinstance(content, str) else \
                [block.get("text", "") for block in content]
        return " ".join(str(part) for part in parts)

    def wants_stream(self, body: dict) -> bool:
        return bool(body.get("stream"))

    def error_response(self, status: int, message: str) -> web.Response:
        error = {"type": ERROR_TYPES.get(status, "api_error"), "message": message}
        return web.json_response({"type": "error", "error": error},
                                 status=status, headers={"request-id": "req_fake"})

    def completion(self, text: str, script: Script) -> web.Response:
        return web.json_response({
            **self._message([{"type": "text", "text": text}], "end_turn"),
            "usage": {"input_tokens": PROMPT_TOKENS, "output_tokens": script.tokens}})

    async def open_stream(self, request: web.Request, body: dict) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "request-id": "req_fake"})
        await response.prepare(request)
        await self._event(response, {"type": "message_start", "message": {
            **self._message([], None),
            "usage": {"input_tokens": PROMPT_TOKENS, "output_tokens": 1,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})
        block = {"type": "tool_use", "id": "toolu_fake", "name": "answer", "input": {}} \
            if _forced.get() else {"type": "text", "text": ""}
        await self._event(response, {"type": "content_block_start", "index": 0,
                                     "content_block": block})
        await self._event(response, {"type": "ping"})
        return response

    async def write_token(self, response: web.StreamResponse, text: str) -> None:
        delta = {"type": "input_json_delta", "partial_json": text} if _forced.get() \
            else {"type": "text_delta", "text": text}
        await self._event(response, {"type": "content_block_delta", "index": 0,
                                     "delta": delta})

    async def write_error(self, response: web.StreamResponse, message: str) -> None:
        await self._event(response, {"type": "error", "error": {
            "type": self.stream_error_type, "message": message}})

    async def write_end(self, response: web.StreamResponse, body: dict, script: Script) -> None:
        await self._event(response, {"type": "content_block_stop", "index": 0})
        await self._event(response, {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use" if _forced.get() else "end_turn",
                      "stop_sequence": None},
            "usage": {"output_tokens": script.tokens}})
        await self._event(response, {"type": "message_stop"})

    @staticmethod
    async def _event(response: web.StreamResponse, payload: dict) -> None:
        await response.write(f"event: {payload['type']}\ndata: ".encode()
                             + json.dumps(payload).encode() + b"\n\n")

    def _message(self, content: list, stop_reason: str | None) -> dict:
        return {"id": "msg_fake", "type": "message", "role": "assistant",
                "content": content, "model": self.model, "stop_reason": stop_reason,
                "stop_sequence": None}


class VertexClaudeServer(AnthropicServer):
    """Claude on Vertex AI: ``POST /v1/projects/{p}/locations/{r}/publishers/anthropic/
    models/{model}:streamRawPredict`` with a bearer token; the model is in the path,
    ``anthropic_version`` in the body; quota errors in Google's error format."""

    project, region, token = "test-project", "us-east5", "test-token"
    last_path: dict | None = None

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/projects/{project}/locations/{region}/publishers/"
                            "anthropic/models/{target}", self.handle_vertex)

    async def handle_vertex(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return self._google_error(401, "UNAUTHENTICATED", "bad access token")
        model, _, method = request.match_info["target"].partition(":")
        self.last_path = {"project": request.match_info["project"], "model": model,
                          "region": request.match_info["region"], "method": method}
        return await self.handle(request)

    def options(self, body: dict) -> dict:
        """The model is in the path (the SDK moves it there from the body)."""
        return {**super().options(body), "model": (self.last_path or {}).get("model")}

    def error_response(self, status: int, message: str) -> web.Response:
        if status == 429:
            return self._google_error(429, "RESOURCE_EXHAUSTED", message)
        return super().error_response(status, message)

    @staticmethod
    def _google_error(status: int, code: str, message: str) -> web.Response:
        return web.json_response({"error": {"code": status, "message": message,
                                            "status": code}}, status=status)


class Case:
    """How the provider contract suite runs the ``anthropic`` provider against this server."""

    name = "anthropic"
    mechanism = "forced tool input_schema"
    provider = "anthropic"
    server = AnthropicServer
    model = AnthropicServer.model
    honours = {"model", "max_tokens", "stop"}  # the Messages API takes no temperature

    @staticmethod
    def settings(server: AnthropicServer) -> dict:
        return {"anthropic_base_url": server.base_url, "anthropic_api_key": "test-key"}


class VertexClaudeCase:
    name = "vertexai-claude"
    mechanism = "forced tool input_schema"
    provider = "vertexai-claude"
    server = VertexClaudeServer
    model = VertexClaudeServer.model
    honours = {"model", "max_tokens", "stop"}

    @staticmethod
    def settings(server: VertexClaudeServer) -> dict:
        return {"anthropic_vertex_base_url": server.base_url,
                "google_cloud_project": server.project,
                "google_cloud_location": server.region,
                "google_oauth_access_token": server.token}


CASES = [Case, VertexClaudeCase]


if __name__ == "__main__":
    from .scripted_llm import serve
    serve(AnthropicServer)
