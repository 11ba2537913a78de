"""A local HTTP server speaking OpenAI's chat-completions wire format, streaming
(SSE) and not, so the real ``openai`` SDK is exercised without a remote LLM.

A request can steer its own answer with a directive anywhere in the user message,
e.g. ``[tokens=2000 delay=0 first=0.2 fail_after=5 drop_after=7]``:
tokens: how many tokens (``tok0 tok1 ...``); first / delay: seconds before the first
token and between tokens; fail_after: send an SSE error event after N tokens;
drop_after: cut the connection after N tokens; status: answer with that HTTP status.
"""
import asyncio
import json
import re
import time
from dataclasses import dataclass, field

from aiohttp import web

DIRECTIVE = re.compile(r"\[([a-z_]+=[^\]]*)\]")


@dataclass
class Script:
    tokens: int = 5
    first: float = 0.0
    delay: float = 0.0
    fail_after: int | None = None
    drop_after: int | None = None
    status: int = 200

    def updated(self, text: str) -> "Script":
        match = DIRECTIVE.search(text)
        if not match:
            return self
        values = dict(item.split("=", 1) for item in match.group(1).split())
        script = Script(**self.__dict__)
        for key, value in values.items():
            kind = int if key in ("tokens", "fail_after", "drop_after", "status") else float
            setattr(script, key, kind(value))
        return script


@dataclass
class Stats:
    requests: int = 0
    open_streams: int = 0
    closed_early: list[float] = field(default_factory=list)  # when a client left mid-stream


def token(i: int) -> str:
    return f"tok{i} "


def expected_text(tokens: int) -> str:
    return "".join(token(i) for i in range(tokens))


class OpenAiServer:
    model = "fake-gpt"

    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script()
        self.stats = Stats()
        self.runner: web.AppRunner | None = None
        self.port = 0
        self.disconnected = asyncio.Event()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self, port: int = 0) -> "OpenAiServer":
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._complete)
        self.runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self.runner:
            await self.runner.cleanup()

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.stats.requests += 1
        prompt = " ".join(str(m.get("content", "")) for m in body["messages"])
        script = self.script.updated(prompt)
        if script.status != 200:
            return web.json_response({"error": {"message": f"scripted {script.status}",
                                                "type": "server_error"}}, status=script.status)
        if not body.get("stream"):
            await asyncio.sleep(script.first + script.delay * max(script.tokens - 1, 0))
            return web.json_response(self._completion(expected_text(script.tokens), script))
        return await self._stream(request, body, script)

    async def _stream(self, request: web.Request, body: dict, script: Script) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        self.stats.open_streams += 1
        finished = False
        try:
            await self._event(response, self._chunk({"role": "assistant", "content": ""}))
            await asyncio.sleep(script.first)
            for i in range(script.tokens):
                if i and script.delay:
                    await asyncio.sleep(script.delay)
                if script.fail_after is not None and i == script.fail_after:
                    await self._event(response, {"error": {"message": "scripted failure",
                                                           "type": "server_error"}})
                    finished = True
                    return response
                if script.drop_after is not None and i == script.drop_after:
                    request.transport.close()
                    finished = True
                    return response
                await self._event(response, self._chunk({"content": token(i)}))
            await self._event(response, self._chunk({}, finish="stop"))
            if (body.get("stream_options") or {}).get("include_usage"):
                await self._event(response, {
                    "id": "chatcmpl-fake", "object": "chat.completion.chunk",
                    "model": self.model, "choices": [],
                    "usage": {"prompt_tokens": 11, "completion_tokens": script.tokens,
                              "total_tokens": 11 + script.tokens}})
            await response.write(b"data: [DONE]\n\n")
            finished = True
            return response
        finally:
            self.stats.open_streams -= 1
            if not finished:
                self.stats.closed_early.append(time.monotonic())
                self.disconnected.set()

    @staticmethod
    async def _event(response: web.StreamResponse, payload: dict) -> None:
        await response.write(b"data: " + json.dumps(payload).encode() + b"\n\n")

    def _chunk(self, delta: dict, finish: str | None = None) -> dict:
        return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def _completion(self, text: str, script: Script) -> dict:
        return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0,
                "model": self.model,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 11, "completion_tokens": script.tokens,
                          "total_tokens": 11 + script.tokens}}
