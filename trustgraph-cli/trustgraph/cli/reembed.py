"""tg-reembed: move a collection's vectors to the embedding model the stack runs now.

After changing ``TG_EMBEDDINGS`` / ``TG_EMBEDDINGS_MODEL``, a collection embedded with
the old model refuses questions (its vectors cannot be compared with the new
model's). This asks the vector store to compute every chunk and entity vector of
the collection again with the new model, in place, and prints the progress.
"""
import argparse
import sys

from .common import connect, parser, positive, run, scope_options

PROG = "tg-reembed"


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = scope_options(parser(PROG, "Re-embed a collection's chunks and entities "
                                           "with the embeddings service's current model."))
    arguments.add_argument("--no-title", action="store_true",
                           help="embed chunks without their document title (as a stack "
                                "run with TG_EMBED_TITLE=false embeds them)")
    arguments.add_argument("--page", type=positive, default=64,
                           help="vectors computed and written per step (default %(default)s)")
    return arguments.parse_args(argv)


def line(record: dict) -> str:
    done = record.get("chunks", 0) + record.get("entities", 0)
    return (f"{done}/{record.get('total', 0)} vectors ({record.get('chunks', 0)} chunks, "
            f"{record.get('entities', 0)} entities) now by {record.get('model')}")


async def invoke(args: argparse.Namespace) -> None:
    request = {"user": args.user, "collection": args.collection,
               "embed_title": not args.no_title, "page": args.page}
    last: dict = {}
    async with connect(args) as client:
        async for record in client.request("reembed", request, args.flow_id):
            last = record
            if not record.get("end_of_stream"):
                print(f"\r{line(record)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    if not last.get("total"):
        print(f"{args.user}/{args.collection} holds no vectors: nothing to re-embed")
        return
    before = last.get("previous_model") or "an unstamped model"
    print(f"{args.user}/{args.collection}: {line(last)} (was {before})")


def main(argv: list[str] | None = None) -> int:
    return run(PROG, invoke(parse(argv)))


if __name__ == "__main__":
    sys.exit(main())
