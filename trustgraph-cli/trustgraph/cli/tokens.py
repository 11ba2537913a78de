"""LLM tokens and what they cost (docs/observability.md), with TrustGraph's command
names and flags:

* ``tg-set-token-costs --model M -i IN -o OUT``: a model's prices, in dollars per
  million tokens, kept in config type ``token-cost`` as TrustGraph keeps them
  (``input_price``, ``output_price``: dollars per token);
* ``tg-show-token-costs``: every model's prices;
* ``tg-show-token-rate``: LLM tokens per second, live, from the gateway's
  ``/metrics`` (``tg_llm_tokens_total``; an admin's key);
* ``tg-show-usage``: LLM tokens (and their cost) per day, user, flow and model
  (``GET /api/v1/usage``; an admin's key).
"""
import argparse
import asyncio
import json
import os
import time
from collections.abc import Sequence

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from .common import connect, parser, positive, print_json, run

SET, SHOW, RATE, USAGE = ("tg-set-token-costs", "tg-show-token-costs", "tg-show-token-rate",
                          "tg-show-usage")
COST_TYPE = "token-cost"
PER_MILLION = 1_000_000
TOKENS_METRIC = "tg_llm_tokens"  # tg_llm_tokens_total, as the parser names its family


def _table(rows: Sequence[Sequence[str]], right: int = 1) -> str:
    """Columns from ``right`` on are numbers, aligned right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.rjust(w) if i >= right else cell.ljust(w)
                               for i, (cell, w) in enumerate(zip(row, widths, strict=True))
                               ).rstrip() for row in rows)


async def set_costs(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        await client.put_config({COST_TYPE: {args.model: {
            "input_price": args.input_costs / PER_MILLION,
            "output_price": args.output_costs / PER_MILLION}}})
    print(f"token costs of {args.model} set: ${args.input_costs:g} in, "
          f"${args.output_costs:g} out per million tokens", flush=True)


def _per_million(value: object) -> str:
    try:
        return f"{float(value) * PER_MILLION:.3f}"  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "-"


async def show_costs(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        costs = await client.config_values(COST_TYPE)
    rows = [("model", "input, $/Mt", "output, $/Mt")]
    for model, value in sorted(costs.items()):
        item = json.loads(value) if isinstance(value, str) else value
        item = item if isinstance(item, dict) else {}
        rows.append((model, _per_million(item.get("input_price")),
                     _per_million(item.get("output_price"))))
    print(_table(rows) if costs else "no token costs set (tg-set-token-costs)", flush=True)


def metrics_url(args: argparse.Namespace) -> str:
    """The gateway's ``/metrics``; TrustGraph's ``.../api/metrics`` names that gateway."""
    if args.metrics_url:
        return args.metrics_url.rstrip("/").removesuffix("/api/metrics").removesuffix(
            "/metrics") + "/metrics"
    return args.url.rstrip("/") + "/metrics"


async def _tokens(session: aiohttp.ClientSession, url: str) -> dict[str, float]:
    async with session.get(url) as response:
        if response.status != 200:
            raise RuntimeError(f"{url}: HTTP {response.status}: {(await response.text())[:200]}")
        text = await response.text()
    totals = {"in": 0.0, "out": 0.0}
    for family in text_string_to_metric_families(text):
        if family.name == TOKENS_METRIC:
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    totals[sample.labels["direction"]] += sample.value
    return totals


async def show_rate(args: argparse.Namespace) -> None:
    url = metrics_url(args)
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    async with aiohttp.ClientSession(headers=headers) as session:
        last, started = await _tokens(session, url), time.monotonic()
        first = dict(last)
        print(f"{'input/s':>10} {'output/s':>10} {'total/s':>10}   {'average/s':>10}",
              flush=True)
        for _ in range(args.number_samples):
            await asyncio.sleep(args.period)
            now = await _tokens(session, url)
            rate_in = (now["in"] - last["in"]) / args.period
            rate_out = (now["out"] - last["out"]) / args.period
            spent = time.monotonic() - started
            average = (now["in"] + now["out"] - first["in"] - first["out"]) / spent
            print(f"{rate_in:10.1f} {rate_out:10.1f} {rate_in + rate_out:10.1f}   "
                  f"{average:10.1f}", flush=True)
            last = now


async def show_usage(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        found = await client.usage(args.days, args.user)
    if args.format == "json":
        print_json(found)
        return
    rows = [("day", "user", "flow", "model", "key", "requests", "in", "out", "cost, $")]
    for row in found["rows"]:
        cost = row.get("cost")
        rows.append((row["day"], row["user"], row.get("flow") or "-",
                     row.get("model") or "-", row.get("key") or "-",
                     str(row.get("requests", 0)), str(row.get("in_tokens", 0)),
                     str(row.get("out_tokens", 0)), "-" if cost is None else f"{cost:.4f}"))
    print(_table(rows, right=5) if found["rows"] else "no LLM tokens used in that time",
          flush=True)


def set_main(argv: list[str] | None = None) -> int:
    arguments = parser(SET, "Set a model's token costs (dollars per million tokens).",
                       flow=False)
    arguments.add_argument("--model", required=True, help="the model's name, as the "
                           "provider reports it")
    arguments.add_argument("-i", "--input-costs", required=True, type=float,
                           help="dollars per million input tokens")
    arguments.add_argument("-o", "--output-costs", required=True, type=float,
                           help="dollars per million output tokens")
    return run(SET, set_costs(arguments.parse_args(argv)))


def show_main(argv: list[str] | None = None) -> int:
    arguments = parser(SHOW, "Show every model's token costs.", flow=False)
    return run(SHOW, show_costs(arguments.parse_args(argv)))


def rate_main(argv: list[str] | None = None) -> int:
    arguments = parser(RATE, "Show LLM tokens per second, live.", flow=False)
    arguments.add_argument("-m", "--metrics-url", default=os.environ.get("TG_METRICS_URL"),
                           help="the gateway's /metrics (TrustGraph's .../api/metrics "
                                "names the same gateway; default: the gateway's)")
    arguments.add_argument("-p", "--period", type=positive, default=1,
                           help="seconds between samples (default %(default)s)")
    arguments.add_argument("-n", "--number-samples", type=positive, default=100,
                           help="samples to show (default %(default)s)")
    return run(RATE, show_rate(arguments.parse_args(argv)))


def usage_main(argv: list[str] | None = None) -> int:
    arguments = parser(USAGE, "Show LLM tokens and their cost per day, user, flow and "
                       "model (an admin's key).", flow=False)
    arguments.add_argument("-d", "--days", type=positive, default=1,
                           help="today and the days before it (default %(default)s)")
    arguments.add_argument("-U", "--user", default=None, help="only this user's")
    arguments.add_argument("--format", choices=("table", "json"), default="table",
                           help="output format (default %(default)s)")
    return run(USAGE, show_usage(arguments.parse_args(argv)))
