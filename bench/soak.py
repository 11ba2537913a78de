"""``make soak``: 1,000 concurrent streaming requests through the gateway of the
default stack, and nothing lost, reordered or duplicated (issue 13).

The scripted LLM (its own process) numbers every token it streams (``tok0 tok1 ...``),
so each answer can be checked token by token. A third of the requests are
text-completion over websockets, a third document-rag over REST NDJSON
(``/api/v1/query``), a third agent (ReAct, the LLM giving the final answer at once)
over websockets; all are sent at once. Checked: every request ended (final frame,
``done`` or an error) within the deadline, no error, and per answer 0 tokens lost,
0 reordered, 0 duplicated. Memory: the RSS of the gateway and every processor
after a warm-up round at the same concurrency (pools, sockets and caches sized for
the load exist by then) is the baseline; after the measured round, once the stack
is idle, each must be back within the tolerance of its baseline.
"""
import argparse
import asyncio
import itertools
import json
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from tests.support.openai_server import OpenAiServer, Script
from tests.support.stack import Stack
from trustgraph.pubsub.embedded import free_port

KINDS = ("text-completion", "document-rag", "agent")
TOKEN = re.compile(r"tok(\d+)")
# RSS back "near baseline": within this many MiB or this fraction, whichever is larger
# (CPython keeps freed arenas and the C++ client its buffers; a leak grows per round).
RSS_TOLERANCE_MIB = 24
RSS_TOLERANCE_FRACTION = 0.10
SETTLE = 5.0  # seconds the stack is left idle before the RSS is read
_ids = itertools.count()


@dataclass
class Result:
    kind: str
    tokens: list[int] = field(default_factory=list)
    error: str | None = None
    ended: bool = False


def check(result: Result, expected: int) -> Counter:
    """lost / duplicated / reordered tokens of one answer, against 0..expected-1."""
    seen = Counter(result.tokens)
    return Counter(
        lost=sum(1 for i in range(expected) if i not in seen),
        duplicated=sum(n - 1 for n in seen.values() if n > 1),
        reordered=sum(1 for a, b in zip(result.tokens, result.tokens[1:], strict=False) if b < a))


# --- the scripted LLM, in a process of its own -----------------------------------

def serve_llm(port: int, tokens: int, first: float, delay: float) -> None:
    from tests.support.agent_llm import SYSTEM, final

    answer = " ".join(f"tok{i}" for i in range(tokens))

    async def run() -> None:
        server = OpenAiServer(Script(tokens=tokens, first=first, delay=delay))
        server.reply = lambda text: final("I can answer.", answer) \
            if SYSTEM["agent-react"] in text else None
        await server.start(port)
        print(f"listening {server.url}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(run())


# --- clients -------------------------------------------------------------------

class Socket:
    """One websocket carrying many streams; frames routed to their ``Result`` by id."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.waiting: dict[str, tuple[Result, asyncio.Future]] = {}
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            await self._route()
        finally:  # the socket closed (or a frame was not understood): nothing hangs
            for result, done in self.waiting.values():
                if not done.done():
                    result.error = result.error or "websocket closed before the end"
                    done.set_result(None)

    async def _route(self) -> None:
        async for message in self.ws:
            frame = json.loads(message.data)
            result, done = self.waiting[frame["id"]]
            response = frame.get("response") or {}
            error = frame.get("error") or response.get("error")
            if result.kind == "agent":
                if response.get("chunk_type") == "answer":
                    result.tokens += map(int, TOKEN.findall(response.get("content", "")))
                final = response.get("end_of_dialog") or frame["complete"]
            else:
                result.tokens += map(int, TOKEN.findall(response.get("response") or ""))
                final = frame["complete"]
            if error:
                result.error = f"{error.get('type')}: {error.get('message')}"
            if error or final:
                result.ended = True
                if not done.done():
                    done.set_result(None)

    async def stream(self, kind: str, request: dict) -> Result:
        request_id, result = f"s{next(_ids)}", Result(kind)
        done = asyncio.get_running_loop().create_future()
        self.waiting[request_id] = (result, done)
        await self.ws.send_str(json.dumps({"id": request_id, "service": kind,
                                           "request": request}))
        await done
        return result


async def rest_query(session: aiohttp.ClientSession, gateway: str, question: str) -> Result:
    result = Result("document-rag")
    async with session.post(f"{gateway}api/v1/query",
                            json={"query": question, "stream": True}) as response:
        if response.status != 200:
            result.error, result.ended = f"HTTP {response.status}: {await response.text()}", True
            return result
        async for line in response.content:
            record = json.loads(line)
            if record["type"] == "content":
                result.tokens += map(int, TOKEN.findall(record["delta"]))
            elif record["type"] in ("done", "error"):
                result.ended = True
                if record["type"] == "error":
                    result.error = f"{record.get('error_type')}: {record['message']}"
    return result


async def round_of(gateway: str, requests: int, sockets: int, deadline: float,
                   alive: Callable[[], bool]) -> tuple[list[Result], float]:
    """``requests`` streams at once, kinds in turn; (results, seconds). Stops waiting
    at the deadline, or when ``alive`` says the stack is gone."""
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        socket_url = f"{gateway.replace('http', 'ws', 1)}api/v1/socket"
        opened = [Socket(await session.ws_connect(socket_url, max_msg_size=0))
                  for _ in range(sockets)]

        def one(n: int):
            kind, question = KINDS[n % len(KINDS)], f"soak question {n}"
            if kind == "document-rag":
                return rest_query(session, gateway, question)
            socket = opened[n % sockets]
            if kind == "agent":
                return socket.stream(kind, {"question": question, "streaming": True})
            return socket.stream(kind, {"system": "", "prompt": question, "streaming": True})

        started = time.perf_counter()
        late = {asyncio.create_task(one(n)) for n in range(requests)}
        finished = set()
        while late and time.perf_counter() - started < deadline and alive():
            done, late = await asyncio.wait(late, timeout=1.0)
            finished |= done
        seconds = time.perf_counter() - started
        results = [task.result() for task in finished]
        results += [Result("unended", error="did not end within the deadline") for _ in late]
        for task in late:
            task.cancel()
        for socket in opened:
            await socket.ws.close()
            socket.reader.cancel()
    return results, seconds


# --- memory ----------------------------------------------------------------------

def rss_mib(stack: Stack) -> dict[str, float]:
    """VmRSS of the gateway and every processor process (not the broker, not tg-start)."""
    found = {}
    for name, pid in sorted(stack.pids().items()):
        if name in ("broker", "tg-start"):
            continue
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        kib = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))
        found[name] = kib / 1024
    return found


def within(after: float, baseline: float) -> bool:
    return after - baseline <= max(RSS_TOLERANCE_MIB, RSS_TOLERANCE_FRACTION * baseline)


# --- the run ---------------------------------------------------------------------

def summary(results: list[Result], seconds: float, tokens: int) -> tuple[str, bool]:
    lines = ["| kind | requests | ended | errors | tokens expected | lost | reordered | "
             "duplicated |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    ok = True
    for kind in (*KINDS, "all"):
        mine = [r for r in results if kind in ("all", r.kind)]
        faults = sum((check(r, tokens) for r in mine if r.error is None), Counter())
        errors = sum(1 for r in mine if r.error)
        ended = sum(1 for r in mine if r.ended)
        lines.append(f"| {kind} | {len(mine)} | {ended} | {errors} | {len(mine) * tokens} | "
                     f"{faults['lost']} | {faults['reordered']} | {faults['duplicated']} |")
        if kind == "all":
            ok = ended == len(mine) and errors == 0 and not +faults
    kinds = Counter(r.error.split(":")[0] for r in results if r.error)
    if kinds:
        lines.append(f"\nerrors by type: {dict(kinds)}; e.g. "
                     f"{next(r.error for r in results if r.error)[:300]}")
    lines.append(f"\n{len(results)} streams at once in {seconds:.1f} s")
    return "\n".join(lines), ok


def memory_table(idle: dict, baseline: dict, peak: dict, after: dict) -> tuple[str, bool]:
    lines = ["| process | idle MiB | baseline MiB | peak MiB | after MiB | after - baseline | "
             "tolerance | back |", "|---|---:|---:|---:|---:|---:|---:|---|"]
    ok = True
    for name in sorted(baseline):
        base, now = baseline[name], after.get(name, float("nan"))
        back = within(now, base)
        ok = ok and back
        lines.append(f"| {name} | {idle.get(name, 0):.0f} | {base:.0f} | "
                     f"{peak.get(name, 0):.0f} | {now:.0f} | {now - base:+.1f} | "
                     f"{max(RSS_TOLERANCE_MIB, RSS_TOLERANCE_FRACTION * base):.0f} | "
                     f"{'yes' if back else 'NO'} |")
    return "\n".join(lines), ok


async def sample_peak(stack: Stack, peak: dict, stop: asyncio.Event) -> None:
    while not stop.is_set():
        for name, value in (await asyncio.to_thread(rss_mib, stack)).items():
            peak[name] = max(peak.get(name, 0.0), value)
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except TimeoutError:
            pass


async def soak(stack: Stack, args: argparse.Namespace) -> bool:
    idle = rss_mib(stack)
    alive = lambda: stack.process.poll() is None  # noqa: E731
    warm, seconds = await round_of(stack.gateway_url, args.requests, args.sockets,
                                   args.deadline, alive)
    print("warm-up:", summary(warm, seconds, args.tokens)[0], file=sys.stderr, flush=True)
    await asyncio.sleep(SETTLE)  # the stack idle, as it is before the measured round
    baseline, peak, stop = rss_mib(stack), {}, asyncio.Event()
    sampler = asyncio.create_task(sample_peak(stack, peak, stop))
    results, seconds = await round_of(stack.gateway_url, args.requests, args.sockets,
                                      args.deadline, alive)
    if not alive():
        print(f"tg-start exited during the soak:\n{stack.log()[-5000:]}", flush=True)
    stop.set()
    await sampler
    await asyncio.sleep(SETTLE)
    after = rss_mib(stack)
    streams, streams_ok = summary(results, seconds, args.tokens)
    memory, memory_ok = memory_table(idle, baseline, peak, after)
    print(f"\n{streams}\n\n{memory}\n")
    print(f"tolerance: after - baseline <= max({RSS_TOLERANCE_MIB} MiB, "
          f"{RSS_TOLERANCE_FRACTION:.0%} of baseline); stack idle {SETTLE:g} s first")
    verdict = streams_ok and memory_ok
    print(f"\nsoak: {'PASS' if verdict else 'FAIL'} (streams {'ok' if streams_ok else 'FAIL'},"
          f" memory {'ok' if memory_ok else 'FAIL'})")
    return verdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--sockets", type=int, default=20,
                        help="websockets the websocket streams share")
    parser.add_argument("--tokens", type=int, default=50)
    parser.add_argument("--first", type=float, default=0.2)
    parser.add_argument("--delay", type=float, default=0.02)
    parser.add_argument("--deadline", type=float, default=600.0,
                        help="seconds for every request of a round to end")
    parser.add_argument("--serve-llm", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_llm is not None:
        serve_llm(args.serve_llm, args.tokens, args.first, args.delay)
        return
    port = free_port()
    llm = subprocess.Popen([sys.executable, "-m", "bench.soak", "--serve-llm", str(port),
                            "--tokens", str(args.tokens), "--first", str(args.first),
                            "--delay", str(args.delay)], stdout=subprocess.PIPE, text=True)
    try:
        llm.stdout.readline()  # "listening ..." once it accepts
        with Stack(env={"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
                        "OPENAI_API_KEY": "soak", "TG_LLM": "openai",
                        "TG_LOG_LEVEL": "WARNING"}, startup_timeout=180) as stack:
            print(f"{args.requests} streams at once ({', '.join(KINDS)} in turn), "
                  f"{args.tokens} numbered tokens each, first after {args.first * 1000:g} "
                  f"ms, then every {args.delay * 1000:g} ms", flush=True)
            passed = asyncio.run(soak(stack, args))
    finally:
        llm.terminate()
        llm.wait()
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
