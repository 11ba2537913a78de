"""The ways the benchmark reads one 200-token stream, each as cheap as a real client
would be: straight from the LLM server, through the gateway's websocket, through the
gateway's REST NDJSON stream, and through the gateway's OpenAI-compatible API (model
``llm``, read as it reads the LLM server). Each returns (ttft, total) in seconds."""
import asyncio
import itertools
import json
import time

import aiohttp

_ids = itertools.count()


MESSAGES = [{"role": "user", "content": "bench"}]


def _openai_token(line: bytes) -> bool:
    if not line.startswith(b"data: {"):
        return False
    choices = json.loads(line[6:]).get("choices") or ()
    return bool(choices and choices[0]["delta"].get("content"))


def _anthropic_token(line: bytes) -> bool:
    return line.startswith(b"data: {") and \
        json.loads(line[6:]).get("type") == "content_block_delta"


def _ollama_token(line: bytes) -> bool:
    return bool(line.strip()) and bool((json.loads(line).get("message") or {}).get("content"))


# family → (path under the server URL, request body, "is this line a token")
FAMILIES = {
    "openai": ("/v1/chat/completions", {"model": "fake-gpt", "stream": True,
                                        "messages": MESSAGES}, _openai_token),
    "anthropic": ("/v1/messages", {"model": "fake-claude", "max_tokens": 1024,
                                   "stream": True, "messages": MESSAGES}, _anthropic_token),
    "ollama": ("/api/chat", {"model": "fake-llama", "stream": True, "messages": MESSAGES},
               _ollama_token),
    # The gateway's OpenAI-compatible API in front of the same server: model llm.
    "gateway-openai": ("/v1/chat/completions", {"model": "llm", "stream": True,
                                                "messages": MESSAGES}, _openai_token),
}


async def direct(session: aiohttp.ClientSession, server_url: str,
                 family: str = "openai") -> tuple[float, float]:
    """Straight from the LLM server at ``server_url`` (no /v1), in its own format."""
    path, body, is_token = FAMILIES[family]
    started = time.perf_counter()
    first = None
    async with session.post(server_url + path, json=body) as response:
        async for line in response.content:
            if first is None and is_token(line):
                first = time.perf_counter()
    return first - started, time.perf_counter() - started


async def openai(session: aiohttp.ClientSession, gateway: str) -> tuple[float, float]:
    """Through the gateway's OpenAI-compatible API (``gateway`` ends with ``/``)."""
    return await direct(session, gateway.rstrip("/"), "gateway-openai")


async def rest(session: aiohttp.ClientSession, gateway: str, key: str | None = None
               ) -> tuple[float, float]:
    """``key``: an API key, sent as a client sends it (Bearer)."""
    started = time.perf_counter()
    first = None
    body = {"system": "", "prompt": "bench", "streaming": True}
    headers = {"Accept": "application/x-ndjson"} | (
        {"Authorization": f"Bearer {key}"} if key else {})
    async with session.post(f"{gateway}api/v1/flow/default/service/text-completion",
                            json=body, headers=headers) as response:
        async for line in response.content:
            frame = json.loads(line)
            if first is None and frame.get("response"):
                first = time.perf_counter()
            if frame.get("error"):
                raise RuntimeError(frame["error"])
    return first - started, time.perf_counter() - started


class Socket:
    """One websocket carrying many concurrent streams, frames routed by id."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.waiting: dict[str, list] = {}  # id -> [started, first, done future]
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self.ws:
            frame = json.loads(message.data)
            state = self.waiting[frame["id"]]
            if "error" in frame or "error" in frame["response"]:
                state[2].set_exception(RuntimeError(str(frame)))
                continue
            if state[1] is None and frame["response"].get(state[3]):
                state[1] = time.perf_counter()
            if frame["complete"]:
                state[2].set_result(time.perf_counter())

    async def stream(self, service: str = "text-completion",
                     request: dict | None = None, text_field: str = "response"
                     ) -> tuple[float, float]:
        request_id = f"b{next(_ids)}"
        done = asyncio.get_running_loop().create_future()
        state = self.waiting[request_id] = [time.perf_counter(), None, done, text_field]
        await self.ws.send_str(json.dumps({
            "id": request_id, "service": service, "flow": "default",
            "request": request or {"system": "", "prompt": "bench", "streaming": True}}))
        finished = await done
        del self.waiting[request_id]
        return state[1] - state[0], finished - state[0]
