"""Ollama native chat wire format: ``POST /api/chat`` answering NDJSON, one
``{"model", "created_at", "message": {"role", "content"}, "done": false}`` line per
token, then ``{"done": true, "done_reason", "prompt_eval_count", "eval_count", ...}``;
errors as an ``{"error": "..."}`` line, or an HTTP status with that body."""
import json

from aiohttp import web

from .scripted_llm import PROMPT_TOKENS, Script, ScriptedServer, expected_text  # noqa: F401

CREATED_AT = "2025-01-01T00:00:00.000000Z"


class OllamaServer(ScriptedServer):
    model = "fake-llama"

    @property
    def base_url(self) -> str:
        return self.url

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/api/chat", self.handle)

    def options(self, body: dict) -> dict:
        options = body.get("options") or {}
        return {"model": body.get("model"), "max_tokens": options.get("num_predict"),
                "temperature": options.get("temperature"), "stop": options.get("stop")}

    def shape(self, body: dict) -> dict | None:
        """Ollama's ``format``: "json", or a JSON Schema."""
        schema = body.get("format")
        return {"mechanism": "format", "schema": schema} if isinstance(schema, dict) else None

    def prompt_text(self, body: dict) -> str:
        return " ".join(str(m.get("content", "")) for m in body.get("messages", []))

    def wants_stream(self, body: dict) -> bool:
        return body.get("stream", True)  # Ollama streams unless told not to

    def error_response(self, status: int, message: str) -> web.Response:
        return web.json_response({"error": message}, status=status)

    def completion(self, text: str, script: Script) -> web.Response:
        return web.json_response(self._final(script, text))

    async def open_stream(self, request: web.Request, body: dict) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        return response

    async def write_token(self, response: web.StreamResponse, text: str) -> None:
        await self._line(response, {"model": self.model, "created_at": CREATED_AT,
                                    "message": {"role": "assistant", "content": text},
                                    "done": False})

    async def write_error(self, response: web.StreamResponse, message: str) -> None:
        await self._line(response, {"error": message})

    async def write_end(self, response: web.StreamResponse, body: dict, script: Script) -> None:
        await self._line(response, self._final(script, ""))

    @staticmethod
    async def _line(response: web.StreamResponse, payload: dict) -> None:
        await response.write(json.dumps(payload).encode() + b"\n")

    def _final(self, script: Script, text: str) -> dict:
        return {"model": self.model, "created_at": CREATED_AT,
                "message": {"role": "assistant", "content": text},
                "done": True, "done_reason": "stop", "total_duration": 1000000,
                "load_duration": 1000, "prompt_eval_count": PROMPT_TOKENS,
                "prompt_eval_duration": 1000, "eval_count": script.tokens,
                "eval_duration": 1000}


class Case:
    """How the provider contract suite runs the ``ollama`` provider against this server."""

    name = "ollama"
    mechanism = "format"
    provider = "ollama"
    server = OllamaServer
    model = OllamaServer.model

    @staticmethod
    def settings(server: OllamaServer) -> dict:
        return {"ollama_host": server.base_url}


CASES = [Case]


if __name__ == "__main__":
    from .scripted_llm import serve
    serve(OllamaServer)
