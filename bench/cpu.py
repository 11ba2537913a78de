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
CPU time each process of the stack spent per token over the level.
``--service prompt`` streams through the prompt processor too (text-completion →
broker → prompt → broker → gateway), each processor in its own process.
``--tracing both`` starts a stack with tracing on (TG_TRACING, the default) and one
with it off side by side, gives them the level's rounds in turn (on, off, off, on,
...), and adds what tracing costs: CPU per token and added TTFT, on against off
(docs/observability.md). In turn, because the CPU a token costs depends on how busy
the machine is (a busy process reads more tokens per wake-up, and its producers
batch more of them per broker message): a stack measured for a minute, then the
other, compared what else ran on the machine in each minute as much as tracing
(+17 % one way, +1 % the other, for the same code). A stack's processes are
counted over the whole level, its idle turns included, so that spans written
after their streams ended count too.
"""
import argparse
import asyncio
import json
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from dataclasses import dataclass, field

import aiohttp

from bench import clients
from bench.stats import median, ms, percentile
from bench.streaming import llm_server
from tests.support.stack import Stack
from trustgraph.tracing.setup import EXPORT_DELAY_MS

LEVELS = (1, 32, 128, 256)
CLIENT = "bench client"  # this process, reading the streams
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
    side = Side(one)
    for _ in range(max(1, count // concurrency)):
        await side.round(concurrency)
    return side.result()


# After a level's last round, before its CPU is read: a kept trace's spans are
# written within EXPORT_DELAY_MS of its end, and that is part of what it costs.
SETTLE = 2 * EXPORT_DELAY_MS / 1000


@dataclass
class Side:
    """One way of streaming (a stack, or the LLM straight), measured round by round.
    Its processes' CPU (``pids``) is counted over the whole level, its turns idle
    while the other stack streams included: spans are written on a thread of their
    own after the streams that made them ended, often in the other stack's turn.
    The bench client (``client``), shared by the stacks, is counted in its own
    rounds only."""

    one: Callable[[], Awaitable[tuple[float, float]]]  # a stream: (ttft, total)
    pids: dict[str, int] = field(default_factory=dict)
    client: int | None = None
    samples: list = field(default_factory=list)
    failures: dict = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    wall: float = 0.0
    turns: list[float] = field(default_factory=list)  # the stack's CPU per token, by round

    def start(self) -> None:
        self.cpu = {name: -cpu_seconds(pid) for name, pid in self.pids.items()}

    def stop(self) -> None:
        for name, pid in self.pids.items():
            self.cpu[name] += cpu_seconds(pid)

    async def round(self, concurrency: int, tokens: int = 1) -> None:
        before = cpu_seconds(self.client) if self.client is not None else 0.0
        stack = sum(cpu_seconds(pid) for pid in self.pids.values())
        started = time.perf_counter()
        results = await asyncio.gather(*(self.one() for _ in range(concurrency)),
                                       return_exceptions=True)
        self.wall += time.perf_counter() - started
        done = sum(not isinstance(result, BaseException) for result in results)
        self.turns.append((sum(cpu_seconds(pid) for pid in self.pids.values()) - stack)
                          / max(1, done * tokens))
        if self.client is not None:
            self.cpu[CLIENT] = self.cpu.get(CLIENT, 0.0) + cpu_seconds(self.client) - before
        for result in results:
            if isinstance(result, BaseException):
                # the same failure of different streams counts once, with its number
                reason = re.sub(r"'id': '[^']*', ", "",
                                f"{type(result).__name__}: {result}")[:160]
                self.failures[reason] = self.failures.get(reason, 0) + 1
            else:
                self.samples.append(result)

    def result(self) -> dict:
        ttft = [s[0] for s in self.samples] or [float("nan")]
        return {"streams": len(self.samples), "failed": sum(self.failures.values()),
                "failures": self.failures, "ttft_p50": median(ttft),
                "ttft_p95": percentile(ttft, 95),
                "streams_per_s": len(self.samples) / self.wall}

    def cpu_per_token(self, tokens: int) -> dict[str, float]:
        streams = max(1, len(self.samples) * tokens)
        return {name: seconds / streams for name, seconds in self.cpu.items()}


async def measure(direct: Streams, stacks: list[tuple[Streams, dict[str, int]]],
                  levels: tuple[int, ...], minimum: int, rounds: int,
                  tokens: int) -> list[list[dict]]:
    """Each level's row for each stack; with two stacks their rounds alternate, in
    the order on, off, off, on, ... so neither is always the one after a pause."""
    rows: list[list[dict]] = [[] for _ in stacks]
    for concurrency in levels:
        count = max(minimum, rounds * concurrency)
        straight = await run_level(direct.direct, concurrency, count)
        sides = [Side(streams.websocket, pids, os.getpid()) for streams, pids in stacks]
        for streams, _ in stacks:  # warm-up
            await asyncio.gather(*(streams.websocket() for _ in range(min(concurrency, 8))))
        await asyncio.sleep(SETTLE)
        for side in sides:
            side.start()
        for turn in range(max(1, count // concurrency)):
            for side in sides if turn % 2 == 0 else sides[::-1]:
                await side.round(concurrency, tokens)
        await asyncio.sleep(SETTLE)
        for row, side in zip(rows, sides, strict=True):
            side.stop()
            row.append({"concurrency": concurrency, "direct": straight,
                        "stack": side.result(), "cpu_per_token": side.cpu_per_token(tokens),
                        "turns": side.turns, "load": load()})
            print(json.dumps(row[-1]), file=sys.stderr, flush=True)
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


async def bench(llm: str, stacks: list[tuple[str, dict[str, int]]],
                args: argparse.Namespace) -> list[list[dict]]:
    """``stacks``: each stack's gateway URL and the pids whose CPU is counted."""
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        sides = [(Streams(session, llm, gateway, args.service, args.sockets), pids)
                 for gateway, pids in stacks]
        levels = tuple(int(level) for level in args.levels.split(","))
        return await measure(sides[0][0], sides, levels, args.streams, args.rounds,
                             args.tokens)


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
                        help="TG_TRACING for the stack; both: a stack with tracing on "
                             "and one with it off, measured in turn, and what tracing "
                             "costs (default on)")
    args = parser.parse_args()
    print(f"bench.cpu: load average before the run {load()}", file=sys.stderr)
    runs = run(args, ("on", "off") if args.tracing == "both" else (args.tracing,))
    sockets = "one websocket per stream" if args.sockets == "each" else "one websocket"
    for state, (names, rows) in runs.items():
        print(f"\n{args.service} over {sockets}, {args.tokens} tokens per "
              f"stream, first after 200 ms, then every 10 ms; 2-core machine; tracing "
              f"{state}{'; ' + ' '.join(args.env) if args.env else ''}\n")
        print(report(rows, [*names, CLIENT]))
    if len(runs) == 2:
        print("\n" + tracing_cost(runs["on"][1], runs["off"][1], runs["on"][0]))


def run(args: argparse.Namespace, states: tuple[str, ...]
        ) -> dict[str, tuple[list[str], list[dict]]]:
    """A stack per state in ``states`` (TG_TRACING on or off), all up at once and
    measured in turn: for each, the processes measured and the rows."""
    processors = ["text-completion", "gateway"]
    if args.service == "prompt":
        processors = ["config", "prompt", "text-completion", "gateway"]
    names = [name for name in ("gateway", "prompt", "text-completion", "broker")
             if name in processors or name == "broker"]
    with llm_server(args.tokens, 0.2, 0.01) as url, ExitStack() as stacks:
        started = []
        for state in states:
            settings = {"TG_TRACING": TRACING[state],
                        **dict(item.split("=", 1) for item in args.env)}
            stack = stacks.enter_context(Stack(
                env={"OPENAI_BASE_URL": f"{url}/v1", "TG_LLM": "openai",
                     "TG_LOG_LEVEL": "WARNING", **settings},
                processors=processors, startup_timeout=120))
            pids = {name: stack.pid(name) for name in names}
            started.append((stack.gateway_url, pids))
        rows = asyncio.run(bench(url, started, args))
    return {state: (names, state_rows) for state, state_rows in zip(states, rows, strict=True)}


def tracing_cost(on: list[dict], off: list[dict], names: list[str]) -> str:
    """What tracing costs per level: the stack's CPU per token (its processes, not the
    bench client) and the added TTFT p50, on against off. Also the median of the
    rounds' ratios, each round with tracing on against the round with it off next to
    it: a burst of other work that lands on a few rounds moves the total, seldom the
    median."""
    lines = ["| conc | stack µs/token on | off | on vs off | paired rounds, median "
             "(min..max) | added TTFT p50 on − off ms |", "|---|---|---|---|---|---|"]
    for r, o in zip(on, off, strict=True):
        cpu_on = sum(r["cpu_per_token"][name] for name in names) * 1e6
        cpu_off = sum(o["cpu_per_token"][name] for name in names) * 1e6
        ratios = [a / b - 1 for a, b in zip(r["turns"], o["turns"], strict=True)]
        added = (r["stack"]["ttft_p50"] - r["direct"]["ttft_p50"]) - \
            (o["stack"]["ttft_p50"] - o["direct"]["ttft_p50"])
        lines.append(f"| {r['concurrency']} | {cpu_on:.0f} | {cpu_off:.0f} | "
                     f"{cpu_on / cpu_off - 1:+.1%} | {median(ratios):+.1%} "
                     f"({min(ratios):+.0%}..{max(ratios):+.0%}) | {ms(added).strip()} |")
    return "What tracing costs:\n" + "\n".join(lines)


if __name__ == "__main__":
    main()
