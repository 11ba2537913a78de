"""tg-load-text: load text and Markdown files (or folders of them) and process them."""
import argparse
import sys

from trustgraph.api import AsyncTrustGraph

from .loading import Source, load_parser, run_loader

PROG = "tg-load-text"
SUFFIXES = (".txt", ".md", ".markdown")


def parse(argv: list[str] | None) -> argparse.Namespace:
    return load_parser(PROG, "text and Markdown", SUFFIXES).parse_args(argv)


async def load(client: AsyncTrustGraph, source: Source, data: bytes,
               args: argparse.Namespace) -> None:
    # The title keeps the file name, whose extension tells Markdown from plain text.
    await client.load_text(data.decode("utf-8"), source.id, title=source.path.name,
                           user=args.user, collection=args.collection, flow=args.flow_id)


def main(argv: list[str] | None = None) -> int:
    return run_loader(PROG, parse(argv), SUFFIXES, load)


if __name__ == "__main__":
    sys.exit(main())
