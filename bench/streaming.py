"""``make bench``: what the streaming backbone adds on top of the LLM.

A local OpenAI-format server (its own process) emits 200 tokens, the first after
200 ms, then one every 10 ms. The same streams are read straight from it and through
the whole stack started by ``tg-start`` (gateway → Pulsar → text-completion →
openai SDK → server), over the websocket, over REST NDJSON and over the gateway's
OpenAI-compatible API (``/v1/chat/completions``, model ``llm``), at 1, 8, 32 and 128
concurrent streams. Reported: time to first token (TTFT) and total time, what the
stack adds to each versus direct (median and p95), streams/s relative to direct,
and what the REST and OpenAI routes add to the TTFT beyond the websocket's (p50).

``--tracing both``: what tracing costs. A stack with tracing on (TG_TRACING, the
default) is measured, then one with it off, and the TTFT each path adds is compared
(docs/observability.md).

``--keys``: what checking an API key costs. The stack then runs the config service
too and its gateway checks keys; a second gateway on the same bus checks none (open,
``TG_GATEWAY_KEYS=false``). Each level measures both, one after the other, the keyed
paths (``websocket+key``: the socket opened with ``?token=``, ``rest+key``: Bearer on
every request) with a key that has per-minute and token limits, so they are counted.
"""
import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass

import aiohttp

from bench import clients
from bench.stats import median, ms, percentile
from tests.support.stack import Stack
from trustgraph.api import AsyncTrustGraph, TrustGraphError
from trustgraph.pubsub.embedded import free_port
from trustgraph.run.start import accepts

LEVELS = (1, 8, 32, 128)
MODES = ("direct", "websocket", "rest", "openai")
KEYED_MODES = ("direct", "websocket", "websocket+key", "rest", "rest+key")


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


@dataclass(frozen=True)
class Gateways:
    open: str  # the URL of a gateway that checks nothing
    keyed: str = ""  # of one that checks API keys (``--keys``)
    key: str = ""


async def run_level(mode: str, concurrency: int, streams: int, llm_url: str,
                    gateways: Gateways) -> dict:
    keyed = mode.endswith("+key")
    gateway, key = (gateways.keyed, gateways.key) if keyed else (gateways.open, None)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        socket = None
        if mode.startswith("websocket"):
            socket = clients.Socket(await session.ws_connect(
                f"{gateway.replace('http', 'ws', 1)}api/v1/socket", max_msg_size=0,
                params={"token": key} if key else None))

        def one():
            if mode == "direct":
                return clients.direct(session, llm_url, "openai")
            if mode.startswith("rest"):
                return clients.rest(session, gateway, key)
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


async def measure(llm_url: str, gateways: Gateways, levels: tuple[int, ...], streams: int
                  ) -> list[dict]:
    rows = []
    for concurrency in levels:
        for mode in KEYED_MODES if gateways.keyed else MODES:
            # Enough streams for a stable p95 at low concurrency, several rounds at high.
            count = max(streams, 3 * concurrency)
            rows.append(await run_level(mode, concurrency, count, llm_url, gateways))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


TRACING = {"on": "true", "off": "false"}  # --tracing: the TG_TRACING of each run


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
    parser.add_argument("--keys", action="store_true",
                        help="also through a gateway checking an API key (see above)")
    parser.add_argument("--tracing", choices=("on", "off", "both"), default="on",
                        help="TG_TRACING for the stack; both: a stack with tracing on, "
                             "then one with it off, and what tracing adds (default on)")
    args = parser.parse_args()
    runs = {state: run(args, state) for state in (("on", "off") if args.tracing == "both"
                                                  else (args.tracing,))}
    for state, rows in runs.items():
        print(f"\n{args.tokens} tokens per stream, first after {args.first * 1000:g} ms, "
              f"then every {args.delay * 1000:g} ms; 2-core machine; tracing {state}"
              f"{'; ' + ' '.join(args.env) if args.env else ''}"
              f"{'; +key: a gateway checking an API key, the others an open one' * args.keys}"
              f"\n")
        print(report(rows))
    if len(runs) == 2:
        print("\n" + tracing_cost(runs["on"], runs["off"]))
    if args.keys:
        wall, cpu = check_cost()
        print(f"\nchecking a key, in process (identify, role table, limits, metrics): "
              f"{wall:.1f} µs per request ({cpu:.1f} µs of CPU); load {os.getloadavg()[0]:.1f}")


def run(args: argparse.Namespace, tracing: str) -> list[dict]:
    """One stack (TG_TRACING as ``tracing`` says), measured at every level."""
    settings = {"TG_TRACING": TRACING[tracing], **dict(item.split("=", 1) for item in args.env)}
    levels = tuple(int(level) for level in args.levels.split(","))
    processors = ["config"] * args.keys + ["text-completion", "gateway"]
    with llm_server(args.tokens, args.first, args.delay) as llm_url:
        with Stack(env={"OPENAI_BASE_URL": f"{llm_url}/v1", "TG_LLM": "openai",
                        "TG_LOG_LEVEL": "WARNING", **settings},
                   processors=processors,
                   startup_timeout=120) as stack:  # a loaded machine starts slowly
            if not args.keys:
                return asyncio.run(measure(llm_url, Gateways(stack.gateway_url), levels,
                                           args.streams))
            key = asyncio.run(first_key(stack.gateway_url))
            with open_gateway(stack) as open_url:
                gateways = Gateways(open_url, stack.gateway_url, key)
                return asyncio.run(measure(llm_url, gateways, levels, args.streams))


def tracing_cost(on: list[dict], off: list[dict]) -> str:
    """What tracing adds to the time to first token, path by path (p50 and p95, ms):
    the TTFT the stack adds to direct with tracing on, less that with it off (each
    run against its own direct streams, so a change of the machine's load between
    the runs cancels out)."""
    lines = ["| path | conc | added TTFT p50 on − off ms | added TTFT p95 on − off ms |",
             "|---|---|---|---|"]

    def added(rows: list[dict]) -> dict[tuple[str, int], tuple[float, float]]:
        direct = {r["concurrency"]: r for r in rows if r["mode"] == "direct"}
        return {(r["mode"], r["concurrency"]): (
            r["ttft_p50"] - direct[r["concurrency"]]["ttft_p50"],
            r["ttft_p95"] - direct[r["concurrency"]]["ttft_p95"])
            for r in rows if r["mode"] != "direct"}
    before = added(off)
    for key, (p50, p95) in added(on).items():
        if key in before:
            lines.append(f"| {key[0]} | {key[1]} | {ms(p50 - before[key][0])} | "
                         f"{ms(p95 - before[key][1])} |")
    return "What tracing adds to the time to first token:\n" + "\n".join(lines)


def check_cost(rounds: int = 20_000) -> tuple[float, float]:
    """Microseconds (wall, CPU) a request spends being checked, in this process: the
    key (its SHA-256 and look-up), the role table and the user it acts for, the
    limits counted and released, the per-user metrics."""
    from trustgraph.gateway.core.access import authorize
    from trustgraph.gateway.core.auth import Auth
    from trustgraph.gateway.core.keyring import KeyRing
    from trustgraph.gateway.core.limits import Limiter, Limits
    from trustgraph.gateway.core.metrics import CALLER_REQUESTS
    from trustgraph.schema import KeyLimits, KeyVerifier, TextCompletionRequest
    from trustgraph.schema.keys import key_digest, new_key, new_salt

    limiter = Limiter()
    ring = KeyRing(None, "bench", limiter, Limits())
    key_id, key = new_key()
    salt = new_salt()
    verifier = KeyVerifier(id=key_id, user="bench", role="user", salt=salt,
                           hash=key_digest(salt, key),
                           limits=KeyLimits(per_minute=10**9, tokens_per_day=10**12))
    ring._keys = {key_id: (verifier, ring._caller(verifier))}
    ring.ready = True
    auth, record = Auth("", ring), TextCompletionRequest(prompt="bench")
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(rounds):
        caller = auth.identify(key, peer="127.0.0.1")
        _, needs = authorize(caller, "text-completion", record)
        meter = limiter.admit(caller.key_id, caller.limits, needs.llm)
        CALLER_REQUESTS.labels(caller.user, caller.role).inc()
        limiter.release(meter, 211)
    return ((time.perf_counter() - started) / rounds * 1e6,
            (time.process_time() - cpu) / rounds * 1e6)


async def first_key(gateway: str) -> str:
    """A user and an admin key with limits (so they are counted), made on the stack's
    still open gateway; returned once the gateway takes it."""
    async with AsyncTrustGraph(gateway) as client:
        await client.add_user("bench")
        key = (await client.create_key("bench", "admin", limits={
            "per_minute": 1_000_000, "tokens_per_day": 10**12}))["secret"]
    async with AsyncTrustGraph(gateway, key) as client:
        for _ in range(200):
            try:
                await client.whoami()
                return key
            except TrustGraphError:
                await asyncio.sleep(0.05)
    raise RuntimeError("the gateway never took the new key")


@contextmanager
def open_gateway(stack: Stack):
    """A second gateway on the stack's bus that checks nothing; yields its URL."""
    port = free_port()
    env = {**stack.env, "TG_GATEWAY_PORT": str(port), "TG_GATEWAY_KEYS": "false",
           "PULSAR_URL": stack.broker_url}
    process = subprocess.Popen([sys.executable, "-m", "trustgraph.run.single", "gateway"],
                               env={**os.environ, **env})
    try:
        deadline = time.monotonic() + 60
        while not accepts("127.0.0.1", port):
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("the second gateway did not start")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/"
    finally:
        process.terminate()
        process.wait()


if __name__ == "__main__":
    main()
