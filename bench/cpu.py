"""``python -m bench.cpu``: what the stack costs per streamed token, and what that
does to throughput and time to first token, at 1, 32, 128 and 256 concurrent
streams, in one table.

At each level the same streams (200 tokens, first after 200 ms, then one every
10 ms, from a scripted OpenAI-format server in its own process, which keeps to that
schedule by its own clock, as a remote model would, however busy the machine is)
are read straight from the server and then through the stack over websockets (one
socket per stream, as browsers open them; ``--sockets one`` puts them all on one),
``--rounds`` rounds of them. Reported: streams/s of each and the stack's share of
direct, the TTFT the stack adds (p50, p95), whether every stream completed, and the
CPU time each process of the stack spent per token while the stack's streams ran.
``--service prompt`` streams through the prompt processor too (text-completion →
broker → prompt → broker → gateway), each processor in its own process.
``--tracing both`` runs a stack with tracing on (TG_TRACING, the default), then one
with it off, and adds what tracing costs: CPU per token and added TTFT, on against
off (docs/observability.md).
"""
import argparse
import asyncio
import json
import os
import re
import sys
import time

import aiohttp

from bench import clients
from bench.stats import median, ms, percentile
from bench.streaming import llm_server
from tests.support.stack import Stack

LEVELS = (1, 32, 128, 256)
PROMPT_REQUEST = {"id": "document-prompt", "streaming": True,
                  "variables": {"query": "bench", "documents": []}}


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


class Streams:
    """Opens the level's streams one way (direct or websocket) and times them."""

    def __init__(self, session: aiohttp.ClientSession, llm: str, gateway: str,
                 service: str, sockets: str) -> None:
        self.session, self.llm, self.service, self.sockets = session, llm, service, sockets
        self.socket_url = f"{gateway.replace('http', 'ws', 1)}api/v1/socket"
        self.shared: clients.Socket | None = None

    async def direct(self) -> tuple[float, float]:
        return await clients.direct(self.session, self.llm, "openai")

    async def websocket(self) -> tuple[float, float]:
        if self.service == "prompt":
            ask = {"service": "prompt", "request": PROMPT_REQUEST, "text_field": "text"}
        else:
            ask = {}
        if self.sockets == "one":
            if self.shared is None:
                self.shared = clients.Socket(await self.session.ws_connect(
                    self.socket_url, max_msg_size=0))
            return await self.shared.stream(**ask)
        socket = clients.Socket(await self.session.ws_connect(self.socket_url,
                                                              max_msg_size=0))
        try:
            return await socket.stream(**ask)
        finally:
            await socket.ws.close()


async def run_level(one, concurrency: int, count: int) -> dict:
    await asyncio.gather(*(one() for _ in range(min(concurrency, 8))))  # warm-up
    samples, failures, started = [], {}, time.perf_counter()
    for _ in range(max(1, count // concurrency)):
        for result in await asyncio.gather(*(one() for _ in range(concurrency)),
                                           return_exceptions=True):
            if isinstance(result, BaseException):
                # the same failure of different streams counts once, with its number
                reason = re.sub(r"'id': '[^']*', ", "", f"{type(result).__name__}: {result}")[:160]
                failures[reason] = failures.get(reason, 0) + 1
            else:
                samples.append(result)
    wall = time.perf_counter() - started
    ttft = [s[0] for s in samples] or [float("nan")]
    return {"streams": len(samples), "failed": sum(failures.values()), "failures": failures,
            "ttft_p50": median(ttft),
            "ttft_p95": percentile(ttft, 95), "streams_per_s": len(samples) / wall}


async def measure(streams: Streams, levels: tuple[int, ...], minimum: int, rounds: int,
                  tokens: int, pids: dict[str, int]) -> list[dict]:
    rows = []
    for concurrency in levels:
        count = max(minimum, rounds * concurrency)
        direct = await run_level(streams.direct, concurrency, count)
        before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        stack = await run_level(streams.websocket, concurrency, count)
        cpu = {name: (cpu_seconds(pid) - before[name]) / max(1, stack["streams"] * tokens)
               for name, pid in pids.items()}
        rows.append({"concurrency": concurrency, "direct": direct, "stack": stack,
                     "cpu_per_token": cpu, "load": load()})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def report(rows: list[dict], names: list[str]) -> str:
    lines = ["| conc | streams ok/failed | direct streams/s | stack streams/s | vs direct | "
             "added TTFT p50 ms | added TTFT p95 ms | "
             + " | ".join(f"{name} µs/token" for name in names) + " | load avg |",
             "|---" * (8 + len(names)) + "|"]
    for row in rows:
        d, s = row["direct"], row["stack"]
        lines.append(
            f"| {row['concurrency']} | {s['streams']}/{s['failed']} | "
            f"{d['streams_per_s']:.2f} | {s['streams_per_s']:.2f} | "
            f"{s['streams_per_s'] / d['streams_per_s']:.1%} | "
            f"{ms(s['ttft_p50'] - d['ttft_p50']).strip()} | "
            f"{ms(s['ttft_p95'] - d['ttft_p95']).strip()} | "
            + " | ".join(f"{row['cpu_per_token'][name] * 1e6:.0f}" for name in names)
            + f" | {row['load']} |")
    return "\n".join(lines)


async def bench(llm: str, gateway: str, args: argparse.Namespace,
                pids: dict[str, int]) -> list[dict]:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        streams = Streams(session, llm, gateway, args.service, args.sockets)
        levels = tuple(int(level) for level in args.levels.split(","))
        return await measure(streams, levels, args.streams, args.rounds, args.tokens, pids)


TRACING = {"on": "true", "off": "false"}  # --tracing: the TG_TRACING of each run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default=",".join(map(str, LEVELS)))
    # A p95 over three rounds rests on the slowest few streams of one or two rounds
    # (at 128 streams it moved between +68 and +171 ms in identical runs); ten rounds
    # are steadier.
    parser.add_argument("--rounds", type=int, default=10,
                        help="rounds of `concurrency` streams at each level")
    parser.add_argument("--streams", type=int, default=24,
                        help="streams per measurement at low concurrency (at least "
                             "--rounds rounds)")
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--service", choices=("text-completion", "prompt"),
                        default="text-completion")
    parser.add_argument("--sockets", choices=("each", "one"), default="each",
                        help="a websocket per stream, or one carrying them all")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting for the stack (repeatable)")
    parser.add_argument("--tracing", choices=("on", "off", "both"), default="on",
                        help="TG_TRACING for the stack; both: a stack with tracing on, "
                             "then one with it off, and what tracing costs (default on)")
    args = parser.parse_args()
    print(f"bench.cpu: load average before the run {load()}", file=sys.stderr)
    runs = {state: run(args, state) for state in (("on", "off") if args.tracing == "both"
                                                  else (args.tracing,))}
    sockets = "one websocket per stream" if args.sockets == "each" else "one websocket"
    for state, (names, rows) in runs.items():
        print(f"\n{args.service} over {sockets}, {args.tokens} tokens per "
              f"stream, first after 200 ms, then every 10 ms; 2-core machine; tracing "
              f"{state}{'; ' + ' '.join(args.env) if args.env else ''}\n")
        print(report(rows, [*names, "bench client"]))
    if len(runs) == 2:
        print("\n" + tracing_cost(runs["on"][1], runs["off"][1], runs["on"][0]))


def run(args: argparse.Namespace, tracing: str) -> tuple[list[str], list[dict]]:
    """One stack (TG_TRACING as ``tracing`` says): the processes measured, and the rows."""
    processors = ["text-completion", "gateway"]
    if args.service == "prompt":
        processors = ["config", "prompt", "text-completion", "gateway"]
    settings = {"TG_TRACING": TRACING[tracing], **dict(item.split("=", 1) for item in args.env)}
    with llm_server(args.tokens, 0.2, 0.01) as url:
        with Stack(env={"OPENAI_BASE_URL": f"{url}/v1", "TG_LLM": "openai",
                        "TG_LOG_LEVEL": "WARNING", **settings},
                   processors=processors, startup_timeout=120) as stack:
            names = [name for name in ("gateway", "prompt", "text-completion", "broker")
                     if name in processors or name == "broker"]
            pids = {name: stack.pid(name) for name in names}
            pids["bench client"] = os.getpid()
            return names, asyncio.run(bench(url, stack.gateway_url, args, pids))


def tracing_cost(on: list[dict], off: list[dict], names: list[str]) -> str:
    """What tracing costs per level: the stack's CPU per token (its processes, not the
    bench client) and the added TTFT p50, on against off."""
    lines = ["| conc | stack µs/token on | off | on vs off | added TTFT p50 on − off ms |",
             "|---|---|---|---|---|"]
    for r, o in zip(on, off, strict=True):
        cpu_on = sum(r["cpu_per_token"][name] for name in names) * 1e6
        cpu_off = sum(o["cpu_per_token"][name] for name in names) * 1e6
        added = (r["stack"]["ttft_p50"] - r["direct"]["ttft_p50"]) - \
            (o["stack"]["ttft_p50"] - o["direct"]["ttft_p50"])
        lines.append(f"| {r['concurrency']} | {cpu_on:.0f} | {cpu_off:.0f} | "
                     f"{cpu_on / cpu_off - 1:+.1%} | {ms(added).strip()} |")
    return "What tracing costs:\n" + "\n".join(lines)


if __name__ == "__main__":
    main()
