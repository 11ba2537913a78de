"""OpenAI chat-completions wire format: SSE ``data: {chunk}`` lines, a usage chunk
when ``stream_options.include_usage`` is set, then ``data: [DONE]``. A schema is
read from ``response_format`` ``json_schema`` (as OpenAI, Azure, Mistral, vLLM and
LM Studio take it)."""
import json

from aiohttp import web

from .scripted_llm import PROMPT_TOKENS, Script, ScriptedServer, expected_text  # noqa: F401


class OpenAiServer(ScriptedServer):
    model = "fake-gpt"
    path = "/v1/chat/completions"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def routes(self, app: web.Application) -> None:
        app.router.add_post(self.path, self.handle)

    def prompt_text(self, body: dict) -> str:
        return " ".join(str(m.get("content", "")) for m in body.get("messages", []))

    def wants_stream(self, body: dict) -> bool:
        return bool(body.get("stream"))

    @staticmethod
    def sampled(body: dict) -> dict:
        """The sampling options a request carried, as ``Sampling`` names them."""
        return {"max_tokens": body.get("max_tokens"), "temperature": body.get("temperature"),
                "stop": body.get("stop")}

    def options(self, body: dict) -> dict:
        return {"model": body.get("model"), **self.sampled(body)}

    def shape(self, body: dict) -> dict | None:
        """OpenAI's structured outputs: ``response_format`` ``json_schema`` (its
        ``strict`` flag said in the mechanism)."""
        format = body.get("response_format") or {}
        if format.get("type") != "json_schema":
            return None
        spec = format["json_schema"]
        strict = " strict" if spec.get("strict") else ""
        return {"mechanism": f"response_format json_schema{strict}", "schema": spec["schema"]}

    def error_response(self, status: int, message: str) -> web.Response:
        return web.json_response({"error": {"message": message, "type": "server_error"}},
                                 status=status)

    def completion(self, text: str, script: Script) -> web.Response:
        return web.json_response({
            "id": "chatcmpl-fake", "object": "chat.completion", "created": 0,
            "model": self.model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": self._usage(script)})

    async def open_stream(self, request: web.Request, body: dict) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await self._event(response, self._chunk({"role": "assistant", "content": ""}))
        return response

    async def write_token(self, response: web.StreamResponse, text: str) -> None:
        await self._event(response, self._chunk({"content": text}))

    async def write_error(self, response: web.StreamResponse, message: str) -> None:
        await self._event(response, {"error": {"message": message, "type": "server_error"}})

    async def write_end(self, response: web.StreamResponse, body: dict, script: Script) -> None:
        await self._event(response, self._chunk({}, finish="stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            await self._event(response, {
                "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                "model": self.model, "choices": [], "usage": self._usage(script)})
        await response.write(b"data: [DONE]\n\n")

    @staticmethod
    async def _event(response: web.StreamResponse, payload: dict) -> None:
        await response.write(b"data: " + json.dumps(payload).encode() + b"\n\n")

    def _chunk(self, delta: dict, finish: str | None = None) -> dict:
        return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    @staticmethod
    def _usage(script: Script) -> dict:
        return {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": script.tokens,
                "total_tokens": PROMPT_TOKENS + script.tokens}


class Case:
    """How the provider contract suite runs the ``openai`` provider against this server."""

    name = "openai"
    mechanism = "response_format json_schema strict"
    provider = "openai"
    server = OpenAiServer
    model = OpenAiServer.model

    @staticmethod
    def settings(server: OpenAiServer) -> dict:
        return {"openai_base_url": server.base_url, "openai_api_key": "test-key"}


CASES = [Case]



if __name__ == "__main__":
    from .scripted_llm import serve
    serve(OpenAiServer)
