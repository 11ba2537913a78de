"""Gemini wire format, for Google AI Studio and Vertex AI alike:
``POST .../models/{model}:streamGenerateContent?alt=sse`` answers SSE events
``data: {GenerateContentResponse}`` separated by CRLF blank lines, as Google's
servers do; the last event carries ``finishReason`` and the final ``usageMetadata``.
Errors are Google's ``{"error": {"code", "message", "status"}}``, as an HTTP answer
or as an event in the stream. AI Studio's path is
``/v1beta/models/{m}:...``; Vertex AI's is
``/v1beta1/projects/{p}/locations/{l}/publishers/google/models/{m}:...``."""
import contextvars
import json

from aiohttp import web

from .scripted_llm import PROMPT_TOKENS, Script, ScriptedServer

STATUS_NAMES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
                503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}

_streaming = contextvars.ContextVar("streaming", default=False)


class GeminiServer(ScriptedServer):
    model = "gemini-fake"

    def __init__(self, script: Script | None = None) -> None:
        super().__init__(script)
        self.last_path = ""

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/{path:.+}", self.dispatch)

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        self.last_path = path
        if path.endswith(":streamGenerateContent"):
            if request.query.get("alt") != "sse":  # without it Google streams one JSON array
                return self.error_response(400, "this server speaks only alt=sse")
            _streaming.set(True)
        elif not path.endswith(":generateContent"):
            return self.error_response(404, f"no method at {path}")
        return await self.handle(request)

    def prompt_text(self, body: dict) -> str:
        texts = [part.get("text", "") for content in body.get("contents", [])
                 for part in content.get("parts", [])]
        system = body.get("systemInstruction") or body.get("system_instruction") or {}
        texts += [part.get("text", "") for part in system.get("parts", [])]
        return " ".join(texts)

    def wants_stream(self, body: dict) -> bool:
        return _streaming.get()

    def options(self, body: dict) -> dict:
        """The model is in the path (``.../models/{model}:method``), the sampling
        options in ``generationConfig``."""
        config = body.get("generationConfig") or {}
        return {"model": self.last_path.rpartition("/models/")[2].partition(":")[0],
                "max_tokens": config.get("maxOutputTokens"),
                "temperature": config.get("temperature"), "stop": config.get("stopSequences")}

    def shape(self, body: dict) -> dict | None:
        """``generationConfig.responseJsonSchema`` (JSON Schema as it is), which
        needs ``responseMimeType: application/json``."""
        config = body.get("generationConfig") or {}
        if "responseJsonSchema" not in config:
            return None
        if config.get("responseMimeType") != "application/json":
            raise AssertionError("responseJsonSchema without the JSON MIME type")
        return {"mechanism": "generationConfig responseJsonSchema",
                "schema": config["responseJsonSchema"]}

    def error_response(self, status: int, message: str) -> web.Response:
        return web.json_response(self._error(status, message), status=status)

    def completion(self, text: str, script: Script) -> web.Response:
        return web.json_response(self._response(text, finish="STOP", out_tokens=script.tokens))

    async def open_stream(self, request: web.Request, body: dict) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        return response

    async def write_token(self, response: web.StreamResponse, text: str) -> None:
        await self._event(response, self._response(text))

    async def write_error(self, response: web.StreamResponse, message: str) -> None:
        await self._event(response, self._error(500, message))

    async def write_end(self, response: web.StreamResponse, body: dict, script: Script) -> None:
        await self._event(response, self._response("", finish="STOP", out_tokens=script.tokens))

    @staticmethod
    async def _event(response: web.StreamResponse, payload: dict) -> None:
        await response.write(b"data: " + json.dumps(payload).encode() + b"\r\n\r\n")

    @staticmethod
    def _error(status: int, message: str) -> dict:
        return {"error": {"code": status, "message": message,
                          "status": STATUS_NAMES.get(status, "UNKNOWN")}}

    def _response(self, text: str, finish: str | None = None,
                  out_tokens: int | None = None) -> dict:
        candidate = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        usage = {"promptTokenCount": PROMPT_TOKENS, "totalTokenCount": PROMPT_TOKENS}
        if out_tokens is not None:
            usage.update(candidatesTokenCount=out_tokens,
                         totalTokenCount=PROMPT_TOKENS + out_tokens)
        return {"candidates": [candidate], "usageMetadata": usage,
                "modelVersion": self.model, "responseId": "fake-response"}


class GoogleAiStudioCase:
    """How the provider contract suite runs ``googleaistudio`` against this server."""

    name = "googleaistudio"
    mechanism = "generationConfig responseJsonSchema"
    provider = "googleaistudio"
    server = GeminiServer
    model = GeminiServer.model

    @staticmethod
    def settings(server: GeminiServer) -> dict:
        return {"google_api_key": "test-key", "google_ai_studio_base_url": server.url,
                "tg_llm_model": GeminiServer.model}


class VertexAiCase:
    """``vertexai`` (Gemini on Vertex AI) against the same server, authenticated by
    a fixed OAuth access token so no Google credentials are needed."""

    name = "vertexai"
    mechanism = "generationConfig responseJsonSchema"
    provider = "vertexai"
    server = GeminiServer
    model = GeminiServer.model

    @staticmethod
    def settings(server: GeminiServer) -> dict:
        return {"google_cloud_project": "test-project", "google_cloud_location": "us-central1",
                "google_oauth_access_token": "test-token", "vertexai_base_url": server.url,
                "tg_llm_model": GeminiServer.model}


CASES = [GoogleAiStudioCase, VertexAiCase]
