"""tg-load-turtle: load RDF files (Turtle or N-Triples) straight into the knowledge
graph of a collection; entities with an rdfs:label also get vectors."""
import argparse
import asyncio
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from trustgraph.api import AsyncTrustGraph, TrustGraphError

from .common import EXIT_ERROR, connect, parser, run, scope_options
from .rdf import rdf

PROG = "tg-load-turtle"
DEFAULT_BATCH = 1000


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = scope_options(parser(PROG, (
        "Parse RDF files here and store their triples in a collection's knowledge graph, "
        "in batches. Each file's triples are stored under a source id (its file name "
        "unless --source says otherwise), so loading a file again adds nothing.")))
    arguments.add_argument("files", nargs="+", metavar="FILE",
                           help="Turtle (.ttl) or N-Triples (.nt) files")
    arguments.add_argument("--format", choices=["turtle", "nt"],
                           help="the files' format (default: from each file's suffix, "
                                "Turtle unless .nt)")
    arguments.add_argument("--source", help="source id to store the triples under "
                                            "(one file only)")
    arguments.add_argument("--batch", type=int, default=DEFAULT_BATCH,
                           help="triples per request (default %(default)s, at most 10000)")
    args = arguments.parse_args(argv)
    if args.source is not None and len(args.files) > 1:
        arguments.error("--source names the source of one file; give one file")
    if not 1 <= args.batch <= 10_000:
        arguments.error("--batch must be between 1 and 10000")
    return args


@dataclass
class Totals:
    files: int = 0
    triples: int = 0
    entities: int = 0
    failed: int = 0


async def load_file(client: AsyncTrustGraph, path: Path, args: argparse.Namespace,
                    totals: Totals) -> None:
    converters = rdf()
    data = await asyncio.to_thread(path.read_bytes)
    triples = await asyncio.to_thread(converters.parse_rdf, data,
                                      args.format or converters.format_for(path))
    with tqdm(total=len(triples), unit="triple", desc=path.name, file=sys.stderr,
              disable=None, leave=False) as bar:
        stored = await client.knowledge_load(
            triples, args.source or path.name, user=args.user, collection=args.collection,
            flow=args.flow_id, batch=args.batch, progress=bar.update)
    totals.files += 1
    totals.triples += stored["triples"]
    totals.entities += stored["entities"]


async def load(args: argparse.Namespace, totals: Totals) -> None:
    async with connect(args) as client:
        for name in args.files:
            path = Path(name)
            try:
                await load_file(client, path, args, totals)
            except TrustGraphError as error:
                if error.type in ("connection", "missing-package"):
                    raise
                _failed(totals, path, f"{error.type}: {error.message}")
            except OSError as error:
                _failed(totals, path, f"cannot read: {error.strerror or error}")
            except ValueError as error:  # RdfError: not valid Turtle / N-Triples
                _failed(totals, path, str(error))


def _failed(totals: Totals, path: Path, why: str) -> None:
    totals.failed += 1
    print(f"{PROG}: {path}: {' '.join(why.split())}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    totals = Totals()
    started = time.monotonic()
    code = run(PROG, load(args, totals))
    print(f"loaded {totals.triples} triples ({totals.entities} labelled entities to embed) "
          f"from {totals.files} file{'s' * (totals.files != 1)} in "
          f"{time.monotonic() - started:.1f} s; {totals.failed} failed", flush=True)
    return code or (EXIT_ERROR if totals.failed else 0)


if __name__ == "__main__":
    sys.exit(main())
