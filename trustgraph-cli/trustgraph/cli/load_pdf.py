"""tg-load-pdf: load PDF files (or folders of them) and process them."""
import argparse
import sys

from trustgraph.api import AsyncTrustGraph

from .loading import Source, load_parser, run_loader

PROG = "tg-load-pdf"
SUFFIXES = (".pdf",)
PDF = "application/pdf"


def parse(argv: list[str] | None) -> argparse.Namespace:
    return load_parser(PROG, "PDF", SUFFIXES).parse_args(argv)


async def load(client: AsyncTrustGraph, source: Source, data: bytes,
               args: argparse.Namespace) -> None:
    await client.load_document(data, source.id, title=source.path.name, kind=PDF,
                               user=args.user, collection=args.collection, flow=args.flow_id)


def main(argv: list[str] | None = None) -> int:
    return run_loader(PROG, parse(argv), SUFFIXES, load)


if __name__ == "__main__":
    sys.exit(main())
