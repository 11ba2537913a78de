"""``tg-show-processor-state`` and ``tg-show-flow-state``: what every processor and
replica last said about itself, and which processors serve a flow, read from the
gateway's ``GET /api/v1/status`` (an admin's key; docs/observability.md).

TrustGraph's commands of these names read Prometheus through ``-m/--metrics-url``
(``http://host:8888/api/metrics``); that flag is taken here too, as the gateway's
address."""
import argparse
import json
import time
from typing import Any

from .common import columns, connect, parser, print_json, run

PROCESSORS = "tg-show-processor-state"
FLOW = "tg-show-flow-state"
METRICS_SUFFIX = "/api/metrics"


def _parser(prog: str, description: str, flow: bool) -> argparse.ArgumentParser:
    arguments = parser(prog, description, flow=flow)
    arguments.add_argument("-m", "--metrics-url", default=None, help=(
        "TrustGraph's metrics address (http://host:8888/api/metrics): the gateway "
        "there is asked"))
    arguments.add_argument("--format", choices=("table", "json"), default="table",
                           help="output format (default %(default)s)")
    return arguments


def parsed(arguments: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    args = arguments.parse_args(argv)
    if args.metrics_url:
        args.url = args.metrics_url.rstrip("/").removesuffix(METRICS_SUFFIX) + "/"
    return args


def _error(state: dict[str, Any]) -> str:
    error = state.get("last_error")
    if not error:
        return ""
    ago = max(0.0, time.time() - error["time"])
    return f"{_ago(ago)} ago: {error['message']}"[:120]


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.0f} h"


def processor_table(status: dict[str, Any]) -> str:
    header = ("processor", "process", "instance", "state", "heard", "flows", "in flight",
              "waiting", "last error")
    rows = [header]
    for state in status["processors"]:
        rows.append((state["processor"], state.get("process", ""), state["instance"],
                     "up" if state["up"] else "DOWN", f"{_ago(state['age'])} ago",
                     ",".join(state.get("flows", [])) or "-", str(state.get("in_flight", 0)),
                     str(state.get("waiting", 0)), _error(state)))
    broker = "up" if status["broker"]["up"] else "DOWN (the gateway's own record did not " \
        "come back)"
    return f"broker: {broker}\n" + columns(rows[1:], rows[0])


def flow_table(status: dict[str, Any], flow_id: str) -> str:
    flow = next((f for f in status["flows"] if f["id"] == flow_id), None)
    if flow is None:
        running = ", ".join(f["id"] for f in status["flows"]) or "none"
        raise LookupError(f"flow {flow_id!r} is not running; running: {running}")
    states = {s["instance"]: s for s in status["processors"]}
    rows = [("processor", "serving", "instances", "in flight", "waiting")]
    for named in flow["processors"]:
        serving = [states[i] for i in named["serving"] if i in states]
        rows.append((named["name"], "yes" if named["ok"] else "NO",
                     ", ".join(named["serving"] + [f"{i} (down)" for i in named["down"]])
                     or "none heard",
                     str(sum(s.get("in_flight", 0) for s in serving)),
                     str(sum(s.get("waiting", 0) for s in serving))))
    verdict = "every processor serves it" if flow["ok"] else "NOT every processor serves it"
    blueprint = flow["blueprint"] or "pinned by TG_FLOWS"
    return f"flow {flow_id} (blueprint {blueprint}): {verdict}\n" + columns(rows[1:], rows[0])


async def show_processors(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        status = await client.status()
    print(json.dumps(status["processors"], indent=2) if args.format == "json"
          else processor_table(status), flush=True)


async def show_flow(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        status = await client.status()
    if args.format == "json":
        found = [f for f in status["flows"] if f["id"] == args.flow_id]
        print_json(found[0] if found else None)
    else:
        print(flow_table(status, args.flow_id), flush=True)


def processors_main(argv: list[str] | None = None) -> int:
    arguments = _parser(PROCESSORS, "Show each processor and replica: up, the flows it "
                        "serves, requests in flight and waiting, its last error.", False)
    return run(PROCESSORS, show_processors(parsed(arguments, argv)))


def flow_main(argv: list[str] | None = None) -> int:
    arguments = _parser(FLOW, "Show which processors a flow's blueprint names and "
                        "whether each serves it now.", True)
    return run(FLOW, show_flow(parsed(arguments, argv)))
