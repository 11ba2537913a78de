"""The three ways the benchmark reads one 200-token stream, each as cheap as a real
client would be: straight from the LLM server, through the gateway's websocket, and
through the gateway's REST NDJSON stream. Each returns (ttft, total) in seconds."""
import asyncio
import itertools
import json
import time

import aiohttp

_ids = itertools.count()


async def direct(session: aiohttp.ClientSession, base_url: str) -> tuple[float, float]:
    started = time.perf_counter()
    first = None
    body = {"model": "fake-gpt", "stream": True,
            "messages": [{"role": "user", "content": "bench"}]}
    async with session.post(f"{base_url}/chat/completions", json=body) as response:
        async for line in response.content:
            if not line.startswith(b"data: {"):
                continue
            chunk = json.loads(line[6:])
            choices = chunk.get("choices") or ()
            if first is None and choices and choices[0]["delta"].get("content"):
                first = time.perf_counter()
    return first - started, time.perf_counter() - started


async def rest(session: aiohttp.ClientSession, gateway: str) -> tuple[float, float]:
    started = time.perf_counter()
    first = None
    body = {"system": "", "prompt": "bench", "streaming": True}
    async with session.post(f"{gateway}api/v1/flow/default/service/text-completion",
                            json=body, headers={"Accept": "application/x-ndjson"}) as response:
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
            if state[1] is None and frame["response"].get("response"):
                state[1] = time.perf_counter()
            if frame["complete"]:
                state[2].set_result(time.perf_counter())

    async def stream(self) -> tuple[float, float]:
        request_id = f"b{next(_ids)}"
        done = asyncio.get_running_loop().create_future()
        state = self.waiting[request_id] = [time.perf_counter(), None, done]
        await self.ws.send_str(json.dumps({
            "id": request_id, "service": "text-completion", "flow": "default",
            "request": {"system": "", "prompt": "bench", "streaming": True}}))
        finished = await done
        del self.waiting[request_id]
        return state[1] - state[0], finished - state[0]
