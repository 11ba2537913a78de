"""``python -m bench.routes``: what each of the gateway's routes to an LLM answer costs,
one request at a time, with everything in this process (a scripted OpenAI-format
server answering at once, the text-completion processor, the gateway, the client).

The websocket, REST NDJSON and the OpenAI-compatible API are asked in turn, round
after round, so a loaded machine slows them alike; reported per route: the process's
CPU per request and the time to first token (medians), and both beyond the
websocket's. ``bench.streaming`` measures the same routes against a paced LLM under
``tg-start`` and concurrency; this isolates what the route itself adds.
"""
import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp

from bench import clients
from tests.support.inprocess import inprocess_stack
from tests.support.openai_server import OpenAiServer, Script
from trustgraph.pubsub.embedded import EmbeddedBroker, free_port


async def measure(rounds: int, tokens: int) -> dict[str, tuple[float, float]]:
    """Per route: (median CPU seconds per request, median TTFT seconds)."""
    broker = EmbeddedBroker(Path(tempfile.mkdtemp()), port=free_port())
    broker.start()
    llm = await OpenAiServer(Script(tokens=tokens, first=0.0, delay=0.0)).start()
    try:
        async with inprocess_stack(broker.url, llm.base_url) as url, \
                aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            socket = clients.Socket(await http.ws_connect(
                url.replace("http", "ws", 1) + "api/v1/socket", max_msg_size=0))
            routes = {"websocket": socket.stream, "rest": lambda: clients.rest(http, url),
                      "openai": lambda: clients.openai(http, url)}
            cpu: dict[str, list[float]] = {route: [] for route in routes}
            ttft: dict[str, list[float]] = {route: [] for route in routes}
            for ask in routes.values():  # warm-up
                for _ in range(20):
                    await ask()
            for _ in range(rounds):
                for route, ask in routes.items():
                    started = time.process_time()
                    first, _ = await ask()
                    cpu[route].append(time.process_time() - started)
                    ttft[route].append(first)
            await socket.ws.close()
    finally:
        await llm.stop()
        broker.stop()
    return {route: (statistics.median(cpu[route]), statistics.median(ttft[route]))
            for route in routes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=600)
    parser.add_argument("--tokens", type=int, default=20)
    args = parser.parse_args()
    results = asyncio.run(measure(args.rounds, args.tokens))
    base_cpu, base_ttft = results["websocket"]
    print(f"\n{args.rounds} requests per route, {args.tokens} tokens each, one at a time\n")
    print("| route | CPU per request ms | beyond websocket ms | TTFT p50 ms | "
          "beyond websocket ms |\n|---|---|---|---|---|")
    for route, (cpu, ttft) in results.items():
        print(f"| {route} | {cpu * 1000:.2f} | {(cpu - base_cpu) * 1000:+.2f} | "
              f"{ttft * 1000:.2f} | {(ttft - base_ttft) * 1000:+.2f} |")


if __name__ == "__main__":
    main()
