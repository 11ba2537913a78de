"""A user's collections, with TrustGraph's flags: tg-list-collections, tg-set-collection,
tg-delete-collection (docs/collections.md). ``-t`` is a tag here, as in TrustGraph's
commands: the token is ``--token``."""
import argparse
import sys

from .common import columns, connect, parser, run

ID_COLUMNS = ("collection", "name", "description", "tags")
# What a delete counts, in the order it is reported.
STORES = ("documents", "chunks", "lexical", "entities", "triples", "communities")


def _parser(prog: str, description: str) -> argparse.ArgumentParser:
    arguments = parser(prog, description, flow=False, token_short=False)
    arguments.add_argument("-U", "--user", default=None,
                           help="whose collections (default: the key's user; another "
                                "user's needs an admin's key)")
    return arguments


def row(collection: dict) -> tuple[str, ...]:
    return (collection["collection"], collection.get("name") or "",
            collection.get("description") or "", ", ".join(collection.get("tags") or []))


async def _list(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        found = await client.list_collections(args.tag_filter, user=args.user)
    print(columns([row(c) for c in found], ID_COLUMNS) if found else "no collections",
          flush=True)


async def _set(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        stored = await client.set_collection(args.collection, name=args.name,
                                             description=args.description, tags=args.tags,
                                             user=args.user)
    print(columns([row(stored)], ID_COLUMNS), flush=True)


async def _delete(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        removed = await client.delete_collection(args.collection, user=args.user)
    counts = ", ".join(f"{removed[store]} {store}" for store in STORES if store in removed)
    print(f"collection {args.collection!r} deleted; removed {counts}", flush=True)


def list_main(argv: list[str] | None = None) -> int:
    prog = "tg-list-collections"
    arguments = _parser(prog, "List the collections: id, name, description and tags.")
    arguments.add_argument("-t", "--tag-filter", action="append", default=None,
                           help="only collections with this tag (repeat: any of them)")
    return run(prog, _list(arguments.parse_args(argv)))


def set_main(argv: list[str] | None = None) -> int:
    prog = "tg-set-collection"
    arguments = _parser(prog, "Name, describe or tag a collection, making it if it does "
                              "not exist; what is not given stays as it was.")
    arguments.add_argument("collection", help="the collection's id")
    arguments.add_argument("-n", "--name", help="its name")
    arguments.add_argument("-d", "--description", help="its description")
    arguments.add_argument("-t", "--tag", dest="tags", action="append", default=None,
                           help="a tag (repeat for several; replaces its tags)")
    return run(prog, _set(arguments.parse_args(argv)))


def delete_main(argv: list[str] | None = None) -> int:
    prog = "tg-delete-collection"
    arguments = _parser(prog, "Delete a collection and everything in it from every store "
                              "(documents, chunks, vectors, the lexical index, triples, "
                              "entity vectors, LazyRAG's cache), saying what was removed.")
    arguments.add_argument("collection", help="the collection's id")
    arguments.add_argument("-y", "--yes", action="store_true",
                           help="do not ask for confirmation")
    args = arguments.parse_args(argv)
    if not args.yes and not _confirmed(args.collection):
        print("not deleted", flush=True)
        return 1
    return run(prog, _delete(args))


def _confirmed(collection: str) -> bool:
    if not sys.stdin.isatty():
        arguments_hint = "(no terminal to ask on: add -y to delete without asking)"
        print(f"delete collection {collection!r} and all its data? {arguments_hint}",
              file=sys.stderr, flush=True)
        return False
    answer = input(f"Delete collection {collection!r} and all its data? (y/N): ")
    return answer.strip().lower() in ("y", "yes")
