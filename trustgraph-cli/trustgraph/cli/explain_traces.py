"""``tg-list-explain-traces`` and ``tg-show-explain-trace ID``: why a RAG answer
cited what it cited (docs/observability.md): the explanations kept with answers'
traces, newest first, and one in full. Their flags follow TrustGraph's commands of
these names (``-C``, ``--limit``, ``--format``, ``--max-answer``,
``--show-provenance``; ``-U/--user`` names the user)."""
import argparse
import json
import sys

from .common import connect, parser, positive, print_listing, run
from .explain_text import explanation, explanation_list

LIST = "tg-list-explain-traces"
SHOW = "tg-show-explain-trace"


def _common(prog: str, description: str) -> argparse.ArgumentParser:
    arguments = parser(prog, description)  # -f/--flow-id: accepted, as TrustGraph's
    arguments.add_argument("-U", "--user", default=None,
                           help="only this user's (an admin's key; others see their own)")
    arguments.add_argument("-C", "--collection", default=None,
                           help="only answers about this collection")
    return arguments


def parse_list(argv: list[str] | None) -> argparse.Namespace:
    arguments = _common(LIST, "List the latest RAG answers with a retrieval explanation.")
    arguments.add_argument("--limit", type=positive, default=50,
                           help="how many (default %(default)s)")
    arguments.add_argument("--format", choices=("table", "json"), default="table")
    return arguments.parse_args(argv)


def parse_show(argv: list[str] | None) -> argparse.Namespace:
    arguments = _common(SHOW, "Show why an answer cited what it cited.")
    arguments.add_argument("question_id", help="the answer's trace id (from the list, or "
                                               "the trace_id of its final frame)")
    arguments.add_argument("--max-answer", type=positive, default=500,
                           help="characters of each candidate's text shown (default "
                                "%(default)s)")
    arguments.add_argument("--show-provenance", action="store_true",
                           help="also name each candidate's document and chunk")
    arguments.add_argument("--format", choices=("text", "json"), default="text")
    return arguments.parse_args(argv)


async def list_explanations(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        found = await client.explanations(args.limit, args.collection, args.user)
    print_listing(found, args.format == "json", "No explainability sessions found.",
                  explanation_list)


async def show_explanation(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        found = await client.explanation(args.question_id)
    print(json.dumps(found, indent=2) if args.format == "json" else
          explanation(found, args.max_answer, args.show_provenance), flush=True)


def list_main(argv: list[str] | None = None) -> int:
    return run(LIST, list_explanations(parse_list(argv)))


def show_main(argv: list[str] | None = None) -> int:
    return run(SHOW, show_explanation(parse_show(argv)))


if __name__ == "__main__":
    sys.exit(show_main())
