"""tg-import-core: a knowledge core file into a collection (docs/knowledge-cores.md),
streamed to the gateway, which stores each page as it reads it.

Importing is idempotent: every store keys what it writes, so an import that was
interrupted is finished by running it again (the pages already stored are stored
again, changing nothing). A core of another embedding model than the collection's
is refused before anything is stored.
"""
import argparse
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

from tqdm import tqdm

from .common import connect, parser, run, scope_options

PROG = "tg-import-core"
READ_BYTES = 256 * 1024


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = scope_options(parser(PROG, (
        "Store a knowledge core (made by tg-export-core) in a collection: its "
        "documents' metadata, chunks, vectors and triples. Run again after an "
        "interruption: nothing is stored twice.")))
    arguments.add_argument("core", type=Path, help="the core file, e.g. core.tgz")
    return arguments.parse_args(argv)


async def _read(path: Path, bar: tqdm) -> AsyncIterator[bytes]:
    with open(path, "rb") as file:
        while data := file.read(READ_BYTES):
            yield data
            bar.update(len(data))  # sent: the gateway reads as fast as it stores


async def import_core(args: argparse.Namespace) -> None:
    started = time.monotonic()
    size = args.core.stat().st_size
    with tqdm(total=size, unit="B", unit_scale=True, desc=PROG, file=sys.stderr,
              disable=None, leave=False) as bar:
        async with connect(args) as client:
            result = await client.import_core(_read(args.core, bar), args.collection,
                                              args.user, args.flow_id)
    source = result.get("manifest", {}).get("source", {})
    into = result.get("into", {})  # whose collection: the key's user unless -U said
    print(f"{PROG}: {args.core} ({source.get('user')}/{source.get('collection')}) -> "
          f"{into.get('user', args.user)}/{args.collection} in "
          f"{time.monotonic() - started:.1f} s: "
          + ", ".join(f"{n} {part}" for part, n in result.get("stored", {}).items()),
          file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    return run(PROG, import_core(parse(argv)))
