"""Mistral chat completions: OpenAI's SSE shape (``data: {chunk}`` ... ``data: [DONE]``)
with Mistral's differences: usage always rides on the last chunk (Mistral has no
``stream_options`` and, like the real API, this server rejects unknown fields
such as it with 422), and errors are ``{"object": "error", "message", "type",
"code"}``, in the HTTP answer or as a chunk in the stream."""
from aiohttp import web

from .openai_server import OpenAiServer
from .scripted_llm import Script

ERROR_TYPES = {400: "invalid_request_error", 401: "unauthorized", 422: "invalid_request_error",
               429: "rate_limited", 503: "service_unavailable"}


class MistralServer(OpenAiServer):
    model = "mistral-fake"

    @property
    def base_url(self) -> str:
        return self.url  # Mistral's clients add /v1 themselves

    def routes(self, app: web.Application) -> None:
        app.router.add_post(self.path, self.checked)

    async def checked(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if "stream_options" in body:
            self.stats.requests += 1
            return web.json_response({"object": "error", "message": {"detail": [
                {"type": "extra_forbidden", "loc": ["body", "stream_options"],
                 "msg": "Extra inputs are not permitted"}]},
                "type": "invalid_request_error", "param": None, "code": None}, status=422)
        return await self.handle(request, body)

    def error_response(self, status: int, message: str) -> web.Response:
        return web.json_response(self._error(status, message), status=status)

    async def write_error(self, response: web.StreamResponse, message: str) -> None:
        await self._event(response, self._error(500, message))

    async def write_end(self, response: web.StreamResponse, body: dict, script: Script) -> None:
        await self._event(response, {**self._chunk({"content": ""}, finish="stop"),
                                     "usage": self._usage(script)})
        await response.write(b"data: [DONE]\n\n")

    @staticmethod
    def _error(status: int, message: str) -> dict:
        return {"object": "error", "message": message,
                "type": ERROR_TYPES.get(status, "internal_error"), "param": None,
                "code": str(status)}


class Case:
    """How the provider contract suite runs the ``mistral`` provider against this server."""

    name = "mistral"
    mechanism = "response_format json_schema strict"
    provider = "mistral"
    server = MistralServer
    model = MistralServer.model

    @staticmethod
    def settings(server: MistralServer) -> dict:
        return {"mistral_api_key": "test-key", "mistral_base_url": server.base_url,
                "tg_llm_model": MistralServer.model}


CASES = [Case]
