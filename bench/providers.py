"""``make bench`` (second part): added time-to-first-token per provider wire format,
and through the prompt service.

For each provider family (OpenAI SSE, Anthropic Messages SSE, Ollama NDJSON) a
scripted server of that format runs in its own process (first token after 200 ms,
then one every 10 ms), and ``tg-start`` runs the default stack's config, prompt +
text-completion (one process) and gateway with that provider. One stream
at a time, in rounds of one stream each way: straight from the server, through the gateway
websocket to text-completion, and (OpenAI) through the prompt service, which renders
a template and streams text-completion's deltas.
"""
import argparse
import asyncio
from collections.abc import Callable

import aiohttp

from bench import clients
from bench.stats import median, ms, percentile
from bench.streaming import llm_server
from tests.support.stack import Stack
from trustgraph.run.registry import DEFAULT_STACK, members

# The default stack's text-completion process (with prompt in it: a process group)
# plus config and the gateway, so the numbers are those of what tg-start runs.
PROCESSORS = ["config", next(entry for entry in DEFAULT_STACK
                             if "text-completion" in members(entry)), "gateway"]

PROMPT_REQUEST = {"id": "document-prompt", "streaming": True,
                  "variables": {"query": "bench", "documents": ["first excerpt", "second"]}}

# family → environment pointing that provider at the scripted server
FAMILIES = {
    "openai": lambda url: {"TG_LLM": "openai", "OPENAI_BASE_URL": f"{url}/v1"},
    "anthropic": lambda url: {"TG_LLM": "anthropic", "ANTHROPIC_BASE_URL": url,
                              "ANTHROPIC_API_KEY": "bench"},
    "ollama": lambda url: {"TG_LLM": "ollama", "OLLAMA_HOST": url},
}


async def interleaved_ttfts(paths: dict[str, Callable], count: int) -> dict[str, list[float]]:
    """TTFTs of each path, taken in rounds (one stream of each path per round), so a
    change in machine load during the run weighs on every path alike."""
    for stream in paths.values():
        await stream()  # warm-up: connections, requesters, templates
    found: dict[str, list[float]] = {path: [] for path in paths}
    for _ in range(count):
        for path, stream in paths.items():
            found[path].append((await stream())[0])
    return found


async def measure_family(family: str, url: str, gateway: str, count: int) -> list[dict]:
    async with aiohttp.ClientSession() as session:
        socket = clients.Socket(await session.ws_connect(
            f"{gateway.replace('http', 'ws', 1)}api/v1/socket"))
        paths = {"direct": lambda: clients.direct(session, url, family),
                 "text-completion": socket.stream}
        if family == "openai":
            paths["prompt"] = lambda: socket.stream("prompt", PROMPT_REQUEST, "text")
        found = await interleaved_ttfts(paths, count)
        await socket.ws.close()
    direct = found.pop("direct")
    return [{"family": family, "path": path, "streams": count,
             "ttft_p50": median(values), "ttft_p95": percentile(values, 95),
             "added_p50": median(values) - median(direct),
             "added_p95": percentile(values, 95) - percentile(direct, 95)}
            for path, values in found.items()]


def report(rows: list[dict]) -> str:
    lines = ["| wire format | path | streams | TTFT p50 ms | TTFT p95 ms | "
             "added TTFT p50 ms | added TTFT p95 ms |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['family']} | {r['path']} | {r['streams']} | {ms(r['ttft_p50'])} | "
                     f"{ms(r['ttft_p95'])} | {ms(r['added_p50'])} | {ms(r['added_p95'])} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=30)
    parser.add_argument("--tokens", type=int, default=50)
    parser.add_argument("--families", default=",".join(FAMILIES))
    args = parser.parse_args()
    rows = []
    for family in args.families.split(","):
        environment = FAMILIES[family]
        with llm_server(args.tokens, 0.2, 0.01, family) as url:
            with Stack(env=environment(url) | {"TG_LOG_LEVEL": "WARNING"},
                       processors=PROCESSORS) as stack:
                rows += asyncio.run(measure_family(family, url, stack.gateway_url,
                                                   args.streams))
    print(f"\none stream at a time, {args.streams} streams per row, first token after "
          f"200 ms then every 10 ms; 2-core machine\n")
    print(report(rows))
    added = {r["path"]: r["added_p50"] for r in rows if r["family"] == "openai"}
    if "prompt" in added:
        print(f"\nprompt path over text-completion (added TTFT p50): "
              f"{ms(added['prompt'] - added['text-completion']).strip()} ms (target <= 2)")


if __name__ == "__main__":
    main()
