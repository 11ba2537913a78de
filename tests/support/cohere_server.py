"""Cohere chat v2 wire format: ``POST /v2/chat`` with ``stream: true`` answers SSE
``event: <type>`` / ``data: {json with the same type}`` pairs: ``message-start``,
``content-start``, one ``content-delta`` per piece of text
(``delta.message.content.text``), ``content-end``, then ``message-end`` whose delta
holds ``finish_reason`` and ``usage`` (``billed_units`` and ``tokens``, which also
counts the preamble Cohere adds). A failure mid-stream ends with ``message-end``
whose ``finish_reason`` is ``ERROR`` and ``error`` says why; HTTP errors are
``{"id", "message"}``. Streams carry no model name."""
import json

from aiohttp import web

from .scripted_llm import PROMPT_TOKENS, Script, ScriptedServer

PREAMBLE_TOKENS = 60  # counted in usage.tokens, not billed


class CohereServer(ScriptedServer):
    model = "command-fake"

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v2/chat", self.handle)

    def options(self, body: dict) -> dict:
        return {"model": body.get("model"), "max_tokens": body.get("max_tokens"),
                "temperature": body.get("temperature"), "stop": body.get("stop_sequences")}

    def shape(self, body: dict) -> dict | None:
        """Cohere's ``response_format`` ``json_object`` with its ``json_schema``."""
        format = body.get("response_format") or {}
        if format.get("type") != "json_object" or "json_schema" not in format:
            return None
        return {"mechanism": "response_format json_object json_schema",
                "schema": format["json_schema"]}

    def prompt_text(self, body: dict) -> str:
        return " ".join(str(m.get("content", "")) for m in body.get("messages", []))

    def wants_stream(self, body: dict) -> bool:
        return bool(body.get("stream"))

    def error_response(self, status: int, message: str) -> web.Response:
        return web.json_response({"id": "fake-error-id", "message": message}, status=status)

    def completion(self, text: str, script: Script) -> web.Response:
        return web.json_response({
            "id": "fake-id", "finish_reason": "COMPLETE",
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
            "usage": self._usage(script)})

    async def open_stream(self, request: web.Request, body: dict) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await self._event(response, "message-start", id="fake-id", delta={"message": {
            "role": "assistant", "content": [], "tool_plan": "", "tool_calls": [],
            "citations": []}})
        await self._event(response, "content-start", index=0,
                          delta={"message": {"content": {"type": "text", "text": ""}}})
        return response

    async def write_token(self, response: web.StreamResponse, text: str) -> None:
        await self._event(response, "content-delta", index=0,
                          delta={"message": {"content": {"text": text}}})

    async def write_error(self, response: web.StreamResponse, message: str) -> None:
        await self._event(response, "message-end", id="fake-id",
                          delta={"error": message, "finish_reason": "ERROR"})

    async def write_end(self, response: web.StreamResponse, body: dict, script: Script) -> None:
        await self._event(response, "content-end", index=0)
        await self._event(response, "message-end", id="fake-id",
                          delta={"finish_reason": "COMPLETE", "usage": self._usage(script)})

    @staticmethod
    async def _event(response: web.StreamResponse, kind: str, **fields) -> None:
        data = json.dumps({"type": kind, **fields})
        await response.write(f"event: {kind}\ndata: {data}\n\n".encode())

    @staticmethod
    def _usage(script: Script) -> dict:
        return {"billed_units": {"input_tokens": PROMPT_TOKENS, "output_tokens": script.tokens},
                "tokens": {"input_tokens": PROMPT_TOKENS + PREAMBLE_TOKENS,
                           "output_tokens": script.tokens}}


class Case:
    """How the provider contract suite runs the ``cohere`` provider against this server."""

    name = "cohere"
    mechanism = "response_format json_object json_schema"
    provider = "cohere"
    server = CohereServer
    model = CohereServer.model

    @staticmethod
    def settings(server: CohereServer) -> dict:
        return {"cohere_api_key": "test-key", "cohere_base_url": server.url,
                "tg_llm_model": CohereServer.model}


CASES = [Case]
