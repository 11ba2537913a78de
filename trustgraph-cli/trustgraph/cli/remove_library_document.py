"""tg-remove-library-document: remove documents from the library, and their chunks,
vectors and triples from the stores."""
import argparse
import sys

from trustgraph.api import TrustGraphError

from .common import EXIT_ERROR, connect, fail, parser, run, scope_options

PROG = "tg-remove-library-document"


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = scope_options(parser(PROG, (
        "Remove documents by id. Their chunks, vectors and triples are then removed from "
        "the stores by the pipeline."), flow=False))
    arguments.add_argument("ids", nargs="+", metavar="ID")
    return arguments.parse_args(argv)


async def remove(args: argparse.Namespace, failed: list[str]) -> None:
    async with connect(args) as client:
        for id in args.ids:
            try:
                await client.remove_document(id, args.user, args.collection)
            except TrustGraphError as error:
                if error.type == "connection":
                    raise
                fail(PROG, error.type, error.message)
                failed.append(id)
            else:
                print(f"removed {id}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    failed: list[str] = []
    return run(PROG, remove(args, failed)) or (EXIT_ERROR if failed else 0)


if __name__ == "__main__":
    sys.exit(main())
