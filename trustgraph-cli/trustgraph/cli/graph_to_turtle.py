"""tg-graph-to-turtle: a collection's knowledge graph as Turtle."""
import argparse
import sys
from pathlib import Path

from trustgraph.schema import Triple

from .common import connect, parser, run, scope_options
from .rdf import rdf

PROG = "tg-graph-to-turtle"
MAX_TRIPLES = 100_000  # the most one triples query returns


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = scope_options(parser(PROG, (
        "Write the triples of a collection as Turtle, to standard output or a file.")))
    arguments.add_argument("-o", "--output", help="file to write (default: standard output)")
    arguments.add_argument("-l", "--limit", type=int, default=MAX_TRIPLES,
                           help="most triples to write (default and maximum %(default)s)")
    args = arguments.parse_args(argv)
    if not 1 <= args.limit <= MAX_TRIPLES:
        arguments.error(f"--limit must be between 1 and {MAX_TRIPLES}")
    return args


async def export(args: argparse.Namespace) -> None:
    converters = rdf()
    async with connect(args) as client:
        triples = await client.triples(limit=args.limit, user=args.user,
                                       collection=args.collection, flow=args.flow_id)
    turtle = converters.to_turtle(Triple.model_validate(t) for t in triples)
    if args.output:
        Path(args.output).write_text(turtle)
    else:
        sys.stdout.write(turtle)
        sys.stdout.flush()
    if len(triples) == args.limit:
        print(f"{PROG}: wrote the first {args.limit} triples; the collection may hold more",
              file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    return run(PROG, export(parse(argv)))


if __name__ == "__main__":
    sys.exit(main())
