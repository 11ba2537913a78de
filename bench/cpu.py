"""``python -m bench.cpu``: CPU seconds each process of the stack spends per streamed
token at 32 concurrent streams (where the time goes, not how fast it feels)."""
import asyncio
import os

import aiohttp

from bench import clients
from bench.streaming import llm_server
from tests.support.stack import Stack

STREAMS, CONCURRENCY, TOKENS = 96, 32, 200


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def streams(gateway: str) -> None:
    async with aiohttp.ClientSession() as session:
        socket = clients.Socket(await session.ws_connect(
            f"{gateway.replace('http', 'ws', 1)}api/v1/socket", max_msg_size=0))
        await asyncio.gather(*(socket.stream() for _ in range(4)))  # warm-up
        for _ in range(STREAMS // CONCURRENCY):
            await asyncio.gather(*(socket.stream() for _ in range(CONCURRENCY)))


def main() -> None:
    with llm_server(TOKENS, 0.2, 0.01) as url:
        with Stack(env={"OPENAI_BASE_URL": f"{url}/v1", "TG_LLM": "openai",
                        "TG_LOG_LEVEL": "WARNING"},
                   processors=["text-completion", "gateway"]) as stack:
            pids = {name: stack.pid(name) for name in ("text-completion", "gateway", "broker")}
            pids["bench client"] = os.getpid()
            before = {name: cpu_seconds(pid) for name, pid in pids.items()}
            asyncio.run(streams(stack.gateway_url))
            used = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
    tokens = STREAMS * TOKENS
    print(f"| process | CPU s | µs per token |\n|---|---|---|")
    for name, seconds in used.items():
        print(f"| {name} | {seconds:.2f} | {seconds / tokens * 1e6:.0f} |")


if __name__ == "__main__":
    main()
