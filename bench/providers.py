"""``make bench`` (second part): added time-to-first-token per provider wire format,
and through the prompt service.

For each provider family (OpenAI SSE, Anthropic Messages SSE, Ollama NDJSON) a
scripted server of that format runs in its own process (first token after 200 ms,
then one every 10 ms), and ``tg-start`` runs the default stack's config, prompt +
text-completion (one process) and gateway with that provider. One stream
at a time, in rounds of one stream each way: straight from the server, through the gateway
websocket to text-completion, and (OpenAI) through the prompt service, which renders
a template and streams text-completion's deltas.

Then the local model (``--local-streams``; 0 skips it): the bundled SmolLM2-135M on
llama.cpp, alone at 1 and 2 threads (time to first token of a RAG-sized prompt,
tokens/s after it, and how soon a stream closed mid-answer frees its sequence),
and in the default stack (one thread): what text-completion and document-rag
through the gateway add beyond the model's own first token. The
model's own is read off llama.cpp's counters for each request (its prompt time plus
one token's decode), so a prompt the stack makes longer is not counted as overhead.
"""
import argparse
import asyncio
import os
import re
import time
import uuid
from collections.abc import Callable

import aiohttp

from bench import clients
from bench.stats import median, ms, percentile
from bench.streaming import llm_server
from tests.support.stack import Stack
from trustgraph.api import AsyncTrustGraph
from trustgraph.model.text_completion.local import provider as local
from trustgraph.model.text_completion.provider import Options
from trustgraph.run.registry import DEFAULT_STACK, members

SETTINGS = Options()  # a request asking nothing of its own: the settings apply

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


# --- the local model --------------------------------------------------------------

LOCAL_KEY = "bench-local"
LOCAL_TOKENS = 48
EXCERPT = ("The Eiffel Tower stands in Paris. Gustave Eiffel's company built it for the "
           "World Fair of 1889. It is 330 metres tall and was the tallest structure in "
           "the world until 1930. ")
SCOPE = {"user": "bench", "collection": "local"}


def rag_sized_prompt() -> str:
    """About 300 tokens, new each time (so llama.cpp's prompt cache cannot skip it)."""
    return f"Note {uuid.uuid4().hex}.\n" + EXCERPT * 6 + "\nQuestion: how tall is it?"


async def model_alone(threads: int, count: int) -> dict:
    provider = local.make(local.Settings(tg_local_threads=threads, tg_local_parallel=1,
                                         tg_llm_max_tokens=LOCAL_TOKENS))
    ttfts, rates = [], []
    try:
        for n in range(count + 1):  # the first loads the model: not counted
            started, first, tokens = time.perf_counter(), None, 0
            async for piece in provider.stream("Answer briefly.", rag_sized_prompt(), SETTINGS):
                if isinstance(piece, str) and first is None:
                    first = time.perf_counter()
                elif not isinstance(piece, str):
                    tokens = piece.out_token
            if n and first is not None and tokens > 1:
                ttfts.append(first - started)
                rates.append((tokens - 1) / (time.perf_counter() - first))
        freed = [await cancel_frees(provider) for _ in range(count)]
    finally:
        await provider.aclose()
    return {"threads": threads, "streams": len(ttfts), "ttft_p50": median(ttfts),
            "ttft_p95": percentile(ttfts, 95), "tokens_per_s": median(rates),
            "freed_p50": median(freed), "freed_max": max(freed)}


async def cancel_frees(provider: local.LocalProvider) -> float:
    """Seconds from closing a stream mid-answer (its third delta) until llama.cpp
    reports no sequence generating."""
    stream = provider.stream("", f"Note {uuid.uuid4().hex}. Write a long story.", SETTINGS)
    for _ in range(3):
        await anext(stream)
    closed = time.perf_counter()
    await stream.aclose()
    while (await provider.counters())["requests_processing"]:
        await asyncio.sleep(0.001)
    return time.perf_counter() - closed


async def counters(session: aiohttp.ClientSession, url: str) -> dict[str, float]:
    async with session.get(f"{url}/metrics",
                           headers={"Authorization": f"Bearer {LOCAL_KEY}"}) as response:
        text = await response.text()
    pairs = (line.split() for line in text.splitlines() if not line.startswith("#"))
    return {name.removeprefix("llamacpp:"): float(value) for name, value in pairs}


def model_first_token(before: dict, after: dict) -> float:
    """The model's own time to its first token for the one request between two
    readings: its prompt time plus one token's decode."""
    delta = {name: after[name] - before[name] for name in after}
    per_token = delta["tokens_predicted_seconds_total"] / max(1, delta["tokens_predicted_total"])
    return delta["prompt_seconds_total"] + per_token


async def stack_added(stack: Stack, count: int) -> list[dict]:
    url = stack.wait_for(lambda: re.findall(r"local model \S+ loaded in [\d.]+ s: (\S+)",
                                            stack.log()), 60, "the model to load")[-1]
    async with AsyncTrustGraph(stack.gateway_url) as client:
        await client.load_text(EXCERPT, "eiffel.txt", title="Eiffel", **SCOPE)
        while (await client.load_status(["eiffel.txt"], **SCOPE))[0]["state"] != "done":
            await asyncio.sleep(0.5)
    async with aiohttp.ClientSession() as session:
        socket = clients.Socket(await session.ws_connect(
            f"{stack.gateway_url.replace('http', 'ws', 1)}api/v1/socket"))
        paths = {
            "text-completion": lambda: socket.stream("text-completion", {
                "system": "Answer briefly.", "prompt": rag_sized_prompt(),
                "streaming": True}, SETTINGS),
            "document-rag": lambda: socket.stream("document-rag", {
                "query": f"How tall is the Eiffel Tower? ({uuid.uuid4().hex[:6]})",
                "doc-limit": 1, "streaming": True, **SCOPE}, "chunk"),
        }
        added: dict[str, list[float]] = {path: [] for path in paths}
        model: dict[str, list[float]] = {path: [] for path in paths}
        for n in range(count + 1):  # the first warms up: not counted
            for path, stream in paths.items():
                before = await counters(session, url)
                ttft, _ = await stream()
                own = model_first_token(before, await counters(session, url))
                if n:
                    added[path].append(ttft - own)
                    model[path].append(own)
        await socket.ws.close()
    return [{"path": path, "streams": count, "model_ttft_p50": median(model[path]),
             "added_p50": median(values), "added_p95": percentile(values, 95)}
            for path, values in added.items()]


def local_report(alone: list[dict], added: list[dict]) -> str:
    lines = ["| local model alone | streams | TTFT p50 ms | TTFT p95 ms | tokens/s p50 | "
             "closed → sequence free p50 ms | max ms |", "|---|---|---|---|---|---|---|"]
    for r in alone:
        lines.append(f"| {r['threads']} thread(s) | {r['streams']} | {ms(r['ttft_p50'])} | "
                     f"{ms(r['ttft_p95'])} | {r['tokens_per_s']:.1f} | "
                     f"{ms(r['freed_p50'])} | {ms(r['freed_max'])} |")
    lines += ["", "| through the gateway (1 thread) | streams | model's own TTFT p50 ms | "
              "added p50 ms | added p95 ms |", "|---|---|---|---|---|"]
    for r in added:
        lines.append(f"| {r['path']} | {r['streams']} | {ms(r['model_ttft_p50'])} | "
                     f"{ms(r['added_p50'])} | {ms(r['added_p95'])} |")
    return "\n".join(lines)


def measure_local(count: int) -> str:
    alone = [asyncio.run(model_alone(threads, count)) for threads in (1, 2)]
    env = {"TG_LOCAL_THREADS": "1", "TG_LOCAL_API_KEY": LOCAL_KEY,
           "TG_LLM_MAX_TOKENS": str(LOCAL_TOKENS)}
    with Stack(env=env, startup_timeout=180) as stack:
        added = asyncio.run(stack_added(stack, count))
    return local_report(alone, added)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=30)
    parser.add_argument("--tokens", type=int, default=50)
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--local-streams", type=int, default=10,
                        help="streams per row for the local model (0: skip it)")
    args = parser.parse_args()
    rows = []
    for family in filter(None, args.families.split(",")):
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
    if args.local_streams:
        report_local = measure_local(args.local_streams)
        print(f"\nthe local model (SmolLM2-135M Q4_1, llama.cpp), one stream at a time, "
              f"~300-token prompts, {LOCAL_TOKENS} tokens; load {os.getloadavg()[0]:.1f}\n")
        print(report_local)


if __name__ == "__main__":
    main()
