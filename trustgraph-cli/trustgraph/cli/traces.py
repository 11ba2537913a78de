"""``tg-list-traces`` and ``tg-show-trace ID``: the traces the platform keeps in its
data dir (docs/observability.md), newest first, and one trace as a tree of its
spans with their timings."""
import argparse
import json
import sys

from .common import connect, parser, positive, print_listing, run
from .trace_tree import trace_list, tree

LIST = "tg-list-traces"
SHOW = "tg-show-trace"


def _format(arguments: argparse.ArgumentParser, choices: tuple[str, str]) -> None:
    arguments.add_argument("--format", choices=choices, default=choices[0],
                           help="output format (default %(default)s)")


def parse_list(argv: list[str] | None) -> argparse.Namespace:
    arguments = parser(LIST, "List the latest traces kept (questions, loaded documents).",
                       flow=False)
    arguments.add_argument("--limit", type=positive, default=20,
                           help="how many (default %(default)s)")
    arguments.add_argument("-U", "--user", default=None,
                           help="only this user's (an admin's key; others see their own)")
    _format(arguments, ("table", "json"))
    return arguments.parse_args(argv)


def parse_show(argv: list[str] | None) -> argparse.Namespace:
    arguments = parser(SHOW, "Show one trace as a tree of its spans with timings.",
                       flow=False)
    arguments.add_argument("trace_id", help="the trace's id (32 hex digits)")
    _format(arguments, ("text", "json"))
    return arguments.parse_args(argv)


async def list_traces(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        found = await client.traces(args.limit, args.user)
    print_listing(found, args.format == "json", "no traces kept (is TG_TRACING on?)",
                  trace_list)


async def show_trace(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        found = await client.trace(args.trace_id)
    print(json.dumps(found, indent=2) if args.format == "json" else tree(found), flush=True)


def list_main(argv: list[str] | None = None) -> int:
    return run(LIST, list_traces(parse_list(argv)))


def show_main(argv: list[str] | None = None) -> int:
    return run(SHOW, show_trace(parse_show(argv)))


if __name__ == "__main__":
    sys.exit(show_main())
