"""tg-invoke-embeddings: the vectors the embeddings service gives texts."""
import argparse
import json
import math
import sys

from .common import connect, parser, run

PROG = "tg-invoke-embeddings"


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = parser(PROG, "Print the embedding vector of each text, one JSON array "
                             "per line, in order.")
    arguments.add_argument("texts", nargs="+", metavar="TEXT")
    arguments.add_argument("--summary", action="store_true",
                           help="print each vector's dimension and norm instead")
    return arguments.parse_args(argv)


def summary_line(text: str, vector: list[float]) -> str:
    norm = math.sqrt(sum(x * x for x in vector))
    return f"{len(vector)} dimensions, norm {norm:.3f}: {text}"


async def invoke(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        vectors = await client.embeddings(args.texts, flow=args.flow_id)
    for text, vector in zip(args.texts, vectors, strict=False):
        print(summary_line(text, vector) if args.summary else json.dumps(vector))
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    return run(PROG, invoke(parse(argv)))


if __name__ == "__main__":
    sys.exit(main())
