"""``tg-verify-system-status``: is everything up? The gateway, the broker, every
processor of every running flow, the stores (readable and writable, by their owners'
own checks), the embeddings model (it embeds a word) and the LLM (it answers a
one-token probe) on each flow, the workbench page. A table, and exit status 0 when
every check passes, 1 when one fails (naming the part). Checks that fail are tried
again every ``--retry-delay`` seconds until ``--global-timeout``: a stack still
starting passes once it is up. TrustGraph's flags."""
import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

import aiohttp

from trustgraph.api import AsyncTrustGraph

from .common import connect, parser, positive

PROG = "tg-verify-system-status"
PROBE_TEXT = "ok"


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = parser(PROG, "Check every part of a running platform; exit 1 naming any "
                       "that fails.", flow=False)
    arguments.add_argument("--global-timeout", type=positive, default=120,
                           help="seconds to keep trying failing checks (default %(default)s)")
    arguments.add_argument("--check-timeout", type=positive, default=10,
                           help="seconds each check may take (default %(default)s)")
    arguments.add_argument("--retry-delay", type=positive, default=3,
                           help="seconds between rounds (default %(default)s)")
    arguments.add_argument("--min-processors", type=int, default=1,
                           help="processors (distinct names) that must be up (default "
                                "%(default)s)")
    arguments.add_argument("--ui-url", default=None,
                           help="the workbench page's address (default: the gateway's)")
    arguments.add_argument("--skip-ui", action="store_true", help="skip the page's check")
    arguments.add_argument("--skip-llm", action="store_true",
                           help="skip the LLM's one-token probe (it spends a token)")
    arguments.add_argument("-v", "--verbose", action="store_true",
                           help="print each round's failures as they happen")
    arguments.add_argument("--lang", default="en", help="accepted as TrustGraph's "
                           "command takes it; the output is English")
    return arguments.parse_args(argv)


def status_checks(status: dict[str, Any], min_processors: int) -> list[Check]:
    """The checks ``GET /api/v1/status`` answers: broker, processors, flows, stores."""
    checks = [Check("broker", status["broker"]["up"], "the gateway's state record came "
                    "back" if status["broker"]["up"] else "the gateway's own state record "
                    "did not come back through the broker")]
    up = {s["processor"] for s in status["processors"] if s["up"]}
    checks.append(Check("processors", len(up) >= min_processors,
                        f"{len(up)} up (at least {min_processors} wanted)"))
    down = {s["instance"]: s for s in status["processors"] if not s["up"]}
    for flow in status["flows"]:
        for named in flow["processors"]:
            name = f"flow {flow['id']}: {named['name']}"
            if named["ok"]:
                checks.append(Check(name, True, f"served by {', '.join(named['serving'])}"))
                continue
            gone = [f"{i} not heard for {down[i]['age']:.0f} s" for i in named["down"]
                    if i in down]
            checks.append(Check(name, False, "not served: " + ("; ".join(gone) or
                                                            "no instance of it is running")))
    for state in status["processors"]:
        for store in state.get("stores", []) if state["up"] else []:
            ok = store["readable"] and store["writable"]
            checks.append(Check(f"store {store['store']} ({state['processor']})", ok,
                                "readable and writable" if ok else store["message"] or
                                f"readable {store['readable']}, writable {store['writable']}"))
    return checks


async def flow_checks(client: AsyncTrustGraph, flows: list[str], llm: bool,
                      timeout: float) -> list[Check]:
    checks = []
    for flow in flows:
        checks.append(await _probe(f"flow {flow}: embeddings model", timeout,
                                   _embeds(client, flow)))
        if llm:
            checks.append(await _probe(f"flow {flow}: LLM", timeout, _answers(client, flow)))
    return checks


async def _embeds(client: AsyncTrustGraph, flow: str) -> str:
    vectors = await client.embeddings([PROBE_TEXT], flow=flow)
    if not vectors or not vectors[0]:
        raise ValueError("answered no vector")
    return f"loaded: a {len(vectors[0])}-dimension vector"


async def _answers(client: AsyncTrustGraph, flow: str) -> str:
    answer = [record async for record in client.request("text-completion", {
        "prompt": f"Say {PROBE_TEXT}.", "max_tokens": 1}, flow)]
    last = answer[-1] if answer else {}
    if last.get("error"):
        raise ValueError(f"{last['error'].get('type')}: {last['error'].get('message')}")
    return f"answered {last.get('response', '')!r} ({last.get('model') or 'model unnamed'})"


async def _probe(name: str, timeout: float, check: Awaitable[str]) -> Check:
    try:
        return Check(name, True, await asyncio.wait_for(check, timeout))
    except TimeoutError:
        return Check(name, False, f"no answer within {timeout:g} s")
    except Exception as error:
        return Check(name, False, " ".join(str(error).split())[:200] or type(error).__name__)


async def page_check(url: str, timeout: float) -> Check:
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) \
                as session, session.get(url) as response:
            ok = response.status == 200 and "html" in response.content_type
            return Check("workbench", ok, f"{url}: HTTP {response.status}")
    except (aiohttp.ClientError, TimeoutError) as error:
        return Check("workbench", False, f"{url}: {type(error).__name__}: {error}")


async def one_round(args: argparse.Namespace) -> list[Check]:
    async with connect(args) as client:
        try:
            status = await asyncio.wait_for(client.status(), args.check_timeout)
        except Exception as error:
            return [Check("gateway", False, f"{args.url}: GET /api/v1/status: "
                          f"{' '.join(str(error).split())[:200]}")]
        checks = [Check("gateway", True, f"{args.url} answers")]
        checks += status_checks(status, args.min_processors)
        checks += await flow_checks(client, [f["id"] for f in status["flows"]],
                                    not args.skip_llm, args.check_timeout)
    if not args.skip_ui:
        checks.append(await page_check(args.ui_url or args.url, args.check_timeout))
    return checks


def table(checks: list[Check]) -> str:
    width = max(len(check.name) for check in checks)
    return "\n".join(f"{'PASS' if c.ok else 'FAIL'}  {c.name.ljust(width)}  {c.detail}"
                     for c in checks)


async def verify(args: argparse.Namespace) -> int:
    deadline = time.monotonic() + args.global_timeout
    while True:
        checks = await one_round(args)
        failed = [check for check in checks if not check.ok]
        if not failed or time.monotonic() + args.retry_delay > deadline:
            break
        if args.verbose:
            print(f"{len(failed)} failing, again in {args.retry_delay} s: "
                  f"{', '.join(c.name for c in failed)}", file=sys.stderr, flush=True)
        await asyncio.sleep(args.retry_delay)
    print(table(checks), flush=True)
    verdict = f"{len(checks) - len(failed)} of {len(checks)} checks passed"
    if failed:
        print(f"{verdict}; failing: {', '.join(c.name for c in failed)}", flush=True)
        return 1
    print(f"{verdict}: the system is healthy", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        return asyncio.run(verify(args))
    except KeyboardInterrupt:
        return 130
