"""tg-export-core: a collection as a knowledge core file (docs/knowledge-cores.md):
its documents' metadata, chunks, chunk and entity vectors and triples with their
provenance, streamed from the gateway into one ``.tgz``.

The file is written as ``<output>.partial`` and renamed once the whole core has
arrived and checked (read as it arrives, to count its records for the progress bar),
so a failed or interrupted export never leaves a file that looks like a core.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

from tqdm import tqdm

from trustgraph.api import TrustGraphError
from trustgraph.schema.core_archive import (
    MANIFEST,
    CoreFormatError,
    CoreReader,
    checked_manifest,
    parse_member_name,
)

from .common import connect, parser, run, scope_options

PROG = "tg-export-core"


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = scope_options(parser(PROG, (
        "Write a collection's knowledge core (documents' metadata, chunks with their "
        "vectors, entity vectors, triples with provenance) to a file, to import it "
        "elsewhere with tg-import-core.")))
    arguments.add_argument("-o", "--output", required=True, type=Path,
                           help="the core file to write, e.g. core.tgz")
    return arguments.parse_args(argv)


class Progress:
    """Records seen of those the manifest counts, and what went wrong in the file."""

    def __init__(self) -> None:
        self.reader = CoreReader()
        self.manifest: dict | None = None
        self.records = 0
        self.bar: tqdm | None = None

    def feed(self, data: bytes) -> None:
        for name, member in self.reader.feed(data):
            if name == MANIFEST:
                self.manifest = checked_manifest(member)
                self.bar = tqdm(total=sum(self.manifest["counts"].values()), unit="record",
                                desc=PROG, file=sys.stderr, disable=None, leave=False)
            elif name == "error.json":
                raise _export_error(member)
            elif (page := parse_member_name(name)) and not page[2]:
                rows = member.count(b"\n")
                self.records += rows
                if self.bar is not None:
                    self.bar.update(rows)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _export_error(member: bytes) -> TrustGraphError:
    try:
        error = json.loads(member)["error"]
        return TrustGraphError(error["type"], f"the export failed midway: {error['message']}")
    except (ValueError, KeyError, TypeError):
        return TrustGraphError("export-error", "the export failed midway")


async def export(args: argparse.Namespace) -> None:
    started = time.monotonic()
    partial = args.output.with_name(args.output.name + ".partial")
    progress = Progress()
    try:
        with open(partial, "wb") as file:
            async with connect(args) as client:
                async for data in client.export_core(args.collection, args.user,
                                                     args.flow_id):
                    file.write(data)
                    progress.feed(data)
            progress.reader.end()
        os.replace(partial, args.output)
    except CoreFormatError as error:
        raise TrustGraphError("export-error", f"the core did not arrive whole: {error}"
                              ) from None
    finally:
        progress.close()
        partial.unlink(missing_ok=True)
    counts = progress.manifest["counts"] if progress.manifest else {}
    source = progress.manifest["source"] if progress.manifest else {}
    print(f"{PROG}: {source.get('user', args.user)}/{args.collection} -> {args.output} "
          f"({args.output.stat().st_size / 1e6:.1f} MB) in {time.monotonic() - started:.1f} s: "
          + ", ".join(f"{counts.get(part, 0)} {part}" for part in counts), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    return run(PROG, export(parse(argv)))
