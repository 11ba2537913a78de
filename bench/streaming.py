"""``make bench``: what the streaming backbone adds on top of the LLM.

A local OpenAI-format server (its own process) emits 200 tokens, the first after
200 ms, then one every 10 ms. The same streams are read straight from it and through
the whole stack started by ``tg-start`` (gateway → Pulsar → text-completion →
openai SDK → server), over the websocket, over REST NDJSON and over the gateway's
OpenAI-compatible API (``/v1/chat/completions``, model ``llm``), at 1, 8, 32 and 128
concurrent streams. Reported: time to first token (TTFT) and total time, what the
stack adds to each versus direct (median and p95), streams/s relative to direct,
and what the REST and OpenAI routes add to the TTFT beyond the websocket's (p50).
"""
import argparse
import asyncio
import json
import subprocess
import sys
import time
from contextlib import contextmanager

import aiohttp

from bench import clients
from bench.stats import median, ms, percentile
from tests.support.stack import Stack
from trustgraph.pubsub.embedded import free_port

LEVELS = (1, 8, 32, 128)
MODES = ("direct", "websocket", "rest", "openai")


@contextmanager
def llm_server(tokens: int, first: float, delay: float, family: str = "openai"):
    """A scripted LLM server of that wire format in its own process; yields its URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", f"tests.support.{family}_server", "--port", str(port),
         "--tokens", str(tokens), "--first", str(first), "--delay", str(delay)],
        stdout=subprocess.PIPE, text=True)
    try:
        process.stdout.readline()  # "listening ..." once it accepts
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait()


async def run_level(mode: str, concurrency: int, streams: int, llm_url: str,
                    gateway: str) -> dict:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        socket = None
        if mode == "websocket":
            socket = clients.Socket(await session.ws_connect(
                f"{gateway.replace('http', 'ws', 1)}api/v1/socket", max_msg_size=0))

        def one():
            if mode == "direct":
                return clients.direct(session, llm_url, "openai")
            if mode == "rest":
                return clients.rest(session, gateway)
            if mode == "openai":
                return clients.openai(session, gateway)
            return socket.stream()

        await asyncio.gather(*(one() for _ in range(min(concurrency, 8))))  # warm-up
        samples, started = [], time.perf_counter()
        for _ in range(max(1, streams // concurrency)):
            samples += await asyncio.gather(*(one() for _ in range(concurrency)))
        wall = time.perf_counter() - started
        if socket:
            await socket.ws.close()
    ttft, total = [s[0] for s in samples], [s[1] for s in samples]
    return {"mode": mode, "concurrency": concurrency, "streams": len(samples),
            "ttft_p50": median(ttft), "ttft_p95": percentile(ttft, 95),
            "total_p50": median(total), "total_p95": percentile(total, 95),
            "streams_per_s": len(samples) / wall}


def report(rows: list[dict]) -> str:
    direct = {r["concurrency"]: r for r in rows if r["mode"] == "direct"}
    socket = {r["concurrency"]: r for r in rows if r["mode"] == "websocket"}
    lines = [
        "| path | streams | conc | TTFT p50 ms | TTFT p95 ms | added TTFT p50 ms | "
        "added TTFT p95 ms | total p50 ms | added total p50 ms | added total p95 ms | "
        "streams/s | vs direct | TTFT p50 vs websocket ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        d = direct[r["concurrency"]]
        w = socket.get(r["concurrency"])
        beyond = ms(r["ttft_p50"] - w["ttft_p50"]) if w and r["mode"] not in (
            "direct", "websocket") else ""
        lines.append(
            f"| {r['mode']} | {r['streams']} | {r['concurrency']} | {ms(r['ttft_p50'])} | "
            f"{ms(r['ttft_p95'])} | {ms(r['ttft_p50'] - d['ttft_p50'])} | "
            f"{ms(r['ttft_p95'] - d['ttft_p95'])} | {ms(r['total_p50'])} | "
            f"{ms(r['total_p50'] - d['total_p50'])} | {ms(r['total_p95'] - d['total_p95'])} | "
            f"{r['streams_per_s']:7.2f} | {r['streams_per_s'] / d['streams_per_s']:6.1%} | "
            f"{beyond} |")
    return "\n".join(lines)


async def measure(llm_url: str, gateway: str, levels: tuple[int, ...], streams: int) -> list[dict]:
    rows = []
    for concurrency in levels:
        for mode in MODES:
            # Enough streams for a stable p95 at low concurrency, several rounds at high.
            count = max(streams, 3 * concurrency)
            rows.append(await run_level(mode, concurrency, count, llm_url, gateway))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default=",".join(map(str, LEVELS)))
    parser.add_argument("--streams", type=int, default=24,
                        help="streams per measurement at low concurrency")
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--first", type=float, default=0.2)
    parser.add_argument("--delay", type=float, default=0.01)
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting for the stack, e.g. TG_CONCURRENCY=64 (repeatable)")
    args = parser.parse_args()
    settings = dict(item.split("=", 1) for item in args.env)
    levels = tuple(int(level) for level in args.levels.split(","))
    with llm_server(args.tokens, args.first, args.delay) as llm_url:
        with Stack(env={"OPENAI_BASE_URL": f"{llm_url}/v1", "TG_LLM": "openai",
                        "TG_LOG_LEVEL": "WARNING", **settings},
                   processors=["text-completion", "gateway"],
                   startup_timeout=120) as stack:  # a loaded machine starts slowly
            rows = asyncio.run(measure(llm_url, stack.gateway_url, levels, args.streams))
    print(f"\n{args.tokens} tokens per stream, first after {args.first * 1000:g} ms, "
          f"then every {args.delay * 1000:g} ms; 2-core machine"
          f"{'; ' + ' '.join(args.env) if args.env else ''}\n")
    print(report(rows))


if __name__ == "__main__":
    main()
