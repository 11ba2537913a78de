"""tg-show-library-documents: the documents of a collection, as a table."""
import argparse
import sys
from datetime import datetime, timezone

from .common import connect, parser, run, scope_options

PROG = "tg-show-library-documents"
COLUMNS = ("id", "title", "kind", "size", "stored (UTC)", "tags")


def parse(argv: list[str] | None) -> argparse.Namespace:
    return scope_options(parser(PROG, "List the documents in a collection of the library.",
                                flow=False)).parse_args(argv)


def row(document: dict) -> tuple[str, ...]:
    stored = datetime.fromtimestamp(document.get("time") or 0, timezone.utc)
    return (document["id"], document.get("title") or "", document.get("kind") or "",
            str(document.get("size", 0)), stored.strftime("%Y-%m-%d %H:%M:%S"),
            ",".join(document.get("tags") or []))


def table(rows: list[tuple[str, ...]]) -> str:
    """Columns padded to their widest cell; the last column is not padded."""
    widths = [max(len(r[i]) for r in [COLUMNS, *rows]) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=False)).rstrip()
             for r in [COLUMNS, *rows]]
    return "\n".join(lines)


async def show(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        documents = await client.list_documents(args.user, args.collection)
    if not documents:
        whose = f"of user {args.user!r}" if args.user else "of this key's user"
        print(f"no documents in collection {args.collection!r} {whose}", flush=True)
        return
    print(table([row(d) for d in documents]), flush=True)


def main(argv: list[str] | None = None) -> int:
    return run(PROG, show(parse(argv)))


if __name__ == "__main__":
    sys.exit(main())
