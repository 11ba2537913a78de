"""AWS Bedrock ConverseStream wire format: ``POST /model/{modelId}/converse-stream``
answered with ``application/vnd.amazon.eventstream``, a sequence of binary frames.

A frame: prelude (total length, headers length: big-endian uint32 each; CRC32 of
those 8 bytes), headers (name length byte, name, type byte 7 = string, uint16 value
length, value), the JSON payload, then the CRC32 of everything before it. Headers
``:message-type`` event|exception, ``:event-type`` (messageStart, contentBlockDelta,
contentBlockStop, messageStop, metadata) or ``:exception-type``, ``:content-type``.
HTTP errors carry ``x-amzn-ErrorType`` and a JSON ``{"message": ...}``. A request
forcing a tool (``toolConfig.toolChoice.tool``: how a schema is asked for) is
answered with that tool's input: a ``toolUse`` block whose JSON streams as
``toolUse.input`` deltas, stopping with ``tool_use``.
"""
import contextvars
import json
import struct
import zlib

from aiohttp import web

from .scripted_llm import PROMPT_TOKENS, Script, ScriptedServer

ERROR_TYPES = {400: "ValidationException", 403: "AccessDeniedException",
               404: "ResourceNotFoundException", 429: "ThrottlingException",
               500: "InternalServerException", 503: "ServiceUnavailableException"}

_forced = contextvars.ContextVar("forced_tool", default=False)  # this request's answer


def frame(headers: dict[str, str], payload: dict) -> bytes:
    encoded = b"".join(_header(name, value) for name, value in headers.items())
    body = json.dumps(payload).encode()
    prelude = struct.pack(">II", 12 + len(encoded) + len(body) + 4, len(encoded))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + encoded + body
    return message + struct.pack(">I", zlib.crc32(message))


def _header(name: str, value: str) -> bytes:
    name_bytes, value_bytes = name.encode(), value.encode()
    return (struct.pack(">B", len(name_bytes)) + name_bytes
            + struct.pack(">BH", 7, len(value_bytes)) + value_bytes)


def event(event_type: str, payload: dict) -> bytes:
    # Bedrock pads every event with a "p" field so sizes don't leak the text.
    return frame({":event-type": event_type, ":content-type": "application/json",
                  ":message-type": "event"}, {**payload, "p": "abcdefgh"})


def exception(exception_type: str, message: str) -> bytes:
    return frame({":exception-type": exception_type, ":content-type": "application/json",
                  ":message-type": "exception"}, {"message": message})


class BedrockServer(ScriptedServer):
    model = "anthropic.claude-3-5-sonnet-20240620-v1:0"

    def __init__(self, script: Script | None = None) -> None:
        super().__init__(script)
        self.model_ids: list[str] = []  # the modelId of each request, from its path

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/model/{model_id}/converse-stream", self.converse_stream)

    async def converse_stream(self, request: web.Request) -> web.StreamResponse:
        self.model_ids.append(request.match_info["model_id"])
        if not request.headers.get("Authorization", "").startswith("AWS4-HMAC-SHA256 "):
            return self.error_response(403, "the request is not SigV4-signed")
        body = await request.json()
        _forced.set(self._forced_tool(body) is not None)
        return await self.handle(request, body)

    def prompt_text(self, body: dict) -> str:
        blocks = [*body.get("system", ())]
        for message in body.get("messages", ()):
            blocks.extend(message.get("content", ()))
        return " ".join(block.get("text", "") for block in blocks)

    def wants_stream(self, body: dict) -> bool:
        return True  # only the streaming operation is served

    def shape(self, body: dict) -> dict | None:
        """The ``inputSchema`` of the tool ``toolChoice`` forces."""
        tool = self._forced_tool(body)
        return None if tool is None else {"mechanism": "forced tool inputSchema",
                                          "schema": tool["inputSchema"]["json"]}

    @staticmethod
    def _forced_tool(body: dict) -> dict | None:
        config = body.get("toolConfig") or {}
        name = ((config.get("toolChoice") or {}).get("tool") or {}).get("name")
        specs = [tool["toolSpec"] for tool in config.get("tools", ())]
        return next((spec for spec in specs if spec["name"] == name), None)

    def options(self, body: dict) -> dict:
        """The model is the path's ``modelId``, the sampling options in
        ``inferenceConfig``."""
        config = body.get("inferenceConfig") or {}
        return {"model": self.model_ids[-1], "max_tokens": config.get("maxTokens"),
                "temperature": config.get("temperature"), "stop": config.get("stopSequences")}

    def error_response(self, status: int, message: str) -> web.Response:
        kind = ERROR_TYPES.get(status, "InternalServerException")
        return web.json_response({"message": message}, status=status, headers={
            "x-amzn-ErrorType": f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"})

    async def open_stream(self, request: web.Request, body: dict) -> web.StreamResponse:
        response = web.StreamResponse(headers={
            "Content-Type": "application/vnd.amazon.eventstream",
            "x-amzn-RequestId": "00000000-0000-0000-0000-000000000000"})
        await response.prepare(request)
        await response.write(event("messageStart", {"role": "assistant"}))
        if _forced.get():
            await response.write(event("contentBlockStart", {"contentBlockIndex": 0, "start": {
                "toolUse": {"toolUseId": "tooluse_fake", "name": "answer"}}}))
        return response

    async def write_token(self, response: web.StreamResponse, text: str) -> None:
        delta = {"toolUse": {"input": text}} if _forced.get() else {"text": text}
        await response.write(event("contentBlockDelta",
                                   {"contentBlockIndex": 0, "delta": delta}))

    async def write_error(self, response: web.StreamResponse, message: str) -> None:
        await response.write(exception("modelStreamErrorException", message))

    async def write_end(self, response: web.StreamResponse, body: dict, script: Script) -> None:
        await response.write(event("contentBlockStop", {"contentBlockIndex": 0}))
        await response.write(event("messageStop", {
            "stopReason": "tool_use" if _forced.get() else "end_turn"}))
        await response.write(event("metadata", {
            "usage": {"inputTokens": PROMPT_TOKENS, "outputTokens": script.tokens,
                      "totalTokens": PROMPT_TOKENS + script.tokens},
            "metrics": {"latencyMs": 1}}))


class Case:
    """How the provider contract suite runs the ``bedrock`` provider against this server."""

    name = "bedrock"
    mechanism = "forced tool inputSchema"
    provider = "bedrock"
    server = BedrockServer
    model = BedrockServer.model  # the provider's default model id, reported as the model

    @staticmethod
    def settings(server: BedrockServer) -> dict:
        return {"bedrock_endpoint_url": server.url, "aws_region": "us-east-1",
                "aws_access_key_id": "AKIDTESTTESTTEST", "aws_secret_access_key": "secret"}


CASES = [Case]
