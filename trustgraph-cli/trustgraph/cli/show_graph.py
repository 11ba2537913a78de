"""tg-show-graph: the triples of a collection's knowledge graph, one per line."""
import argparse
import json
import sys

from .common import connect, parser, run, scope_options

PROG = "tg-show-graph"
MAX_LIMIT = 100_000


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = scope_options(parser(PROG, (
        "Print triples of a collection as N-Triples-like lines (<iri> or \"literal\"), "
        "optionally only those matching a subject, predicate and/or object.")))
    arguments.add_argument("-s", "--subject", help="only triples with this subject IRI")
    arguments.add_argument("-p", "--predicate", help="only triples with this predicate IRI")
    arguments.add_argument("-o", "--object", help="only triples with this object (an IRI, "
                                                  "or a literal with --literal)")
    arguments.add_argument("--literal", action="store_true",
                           help="the --object value is a literal, not an IRI")
    arguments.add_argument("-l", "--limit", type=int, default=10_000,
                           help=f"most triples to show (default %(default)s, at most "
                                f"{MAX_LIMIT})")
    args = arguments.parse_args(argv)
    if not 1 <= args.limit <= MAX_LIMIT:
        arguments.error(f"--limit must be between 1 and {MAX_LIMIT}")
    if args.literal and args.object is None:
        arguments.error("--literal needs --object")
    return args


def term_text(term: dict) -> str:
    """``<iri>`` or a quoted, escaped literal."""
    if term.get("t") == "i":
        return f"<{term['i']}>"
    return json.dumps(term.get("v", ""), ensure_ascii=False)


def triple_line(triple: dict) -> str:
    return " ".join(term_text(triple[k]) for k in ("s", "p", "o")) + " ."


async def show(args: argparse.Namespace) -> None:
    obj = {"t": "l", "v": args.object} if args.literal else args.object
    async with connect(args) as client:
        triples = await client.triples(args.subject, args.predicate, obj, args.limit,
                                       user=args.user, collection=args.collection,
                                       flow=args.flow_id)
    out = sys.stdout
    for triple in triples:
        out.write(triple_line(triple) + "\n")
    out.flush()
    if len(triples) == args.limit:
        print(f"{PROG}: showing the first {args.limit} triples; there may be more "
              f"(raise --limit or narrow with -s/-p/-o)", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    return run(PROG, show(parse(argv)))


if __name__ == "__main__":
    sys.exit(main())
