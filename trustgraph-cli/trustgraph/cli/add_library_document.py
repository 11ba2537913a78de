"""tg-add-library-document: store documents in the library (processing them is
separate: --process, or tg-load-text / tg-load-pdf which do both)."""
import argparse
import mimetypes
import sys
from pathlib import Path

from trustgraph.api import AsyncTrustGraph, TrustGraphError

from .common import EXIT_ERROR, connect, fail, parser, run, scope_options

PROG = "tg-add-library-document"
KINDS = {".md": "text/markdown", ".markdown": "text/markdown", ".txt": "text/plain",
         ".pdf": "application/pdf"}


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = scope_options(parser(PROG, (
        "Store files in the library as documents (id: the file name unless --id). "
        "Large files are uploaded in parts.")))
    arguments.add_argument("files", nargs="+", metavar="FILE")
    arguments.add_argument("--id", help="document id (one file only)")
    arguments.add_argument("--title", help="title (default: the file name)")
    arguments.add_argument("--kind", help="MIME type (default: from the file's suffix)")
    arguments.add_argument("--comments", default="", help="free text kept with it")
    arguments.add_argument("--tags", default="", help="comma-separated tags")
    arguments.add_argument("--process", action="store_true",
                           help="also send it down the flow's pipeline (-f)")
    args = arguments.parse_args(argv)
    if args.id is not None and len(args.files) > 1:
        arguments.error("--id names one document; give one file")
    return args


def kind_of(path: Path) -> str:
    return KINDS.get(path.suffix.lower()) or mimetypes.guess_type(path.name)[0] or ""


async def add_one(client: AsyncTrustGraph, path: Path, args: argparse.Namespace) -> None:
    tags = [tag.strip() for tag in args.tags.split(",") if tag.strip()]
    document = await client.add_document(
        path.read_bytes(), args.id or path.name, title=args.title or path.name,
        kind=args.kind or kind_of(path), comments=args.comments, tags=tags,
        user=args.user, collection=args.collection)
    print(f"added {document['id']} ({document['kind']}, {document['size']} bytes)",
          flush=True)
    if args.process:
        await client.add_processing(document["id"], flow=args.flow_id, user=args.user,
                                    collection=args.collection)
        print(f"processing {document['id']} on flow {args.flow_id}", flush=True)


async def add(args: argparse.Namespace, failed: list[str]) -> None:
    """Each file in turn; one that fails is reported and the rest carry on."""
    async with connect(args) as client:
        for name in args.files:
            try:
                await add_one(client, Path(name), args)
            except TrustGraphError as error:
                if error.type == "connection":
                    raise
                fail(PROG, error.type, f"{name}: {error.message}")
                failed.append(name)
            except OSError as error:
                fail(PROG, "error", f"{name}: cannot read: {error.strerror or error}")
                failed.append(name)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    failed: list[str] = []
    return run(PROG, add(args, failed)) or (EXIT_ERROR if failed else 0)


if __name__ == "__main__":
    sys.exit(main())
