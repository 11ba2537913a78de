"""What tg-load-text and tg-load-pdf share: finding the files, naming the documents,
loading a few at a time behind a progress bar, and the summary at the end.

Document ids come from paths, so loading the same folder again replaces each document
with itself (the pipeline writes nothing twice): a file named on the command line is
its file name; a file found in a folder is its path relative to that folder
(``notes/a.md``). ``--prefix`` is put in front of every id.

A load is answered once the librarian holds the document durably; decoding,
embedding and extraction continue on the pipeline afterwards. By default the
progress bar therefore counts files and bytes accepted. With ``--wait`` the command
follows each document down the pipeline (load_wait.py) until all its chunks have
their vectors stored: the bar then counts files done and chunks stored per second,
and a document the pipeline could not read is reported as failed. ``--wait-graph``
waits, beyond that, for each chunk's triples and entity vectors.
"""
import argparse
import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from trustgraph.api import AsyncTrustGraph, TrustGraphError

from .common import EXIT_ERROR, connect, parser, run, scope_options
from .load_wait import Waiter

DEFAULT_CONCURRENCY = 4
DEFAULT_WAIT_TIMEOUT = 300.0  # seconds without progress before --wait gives up
TRANSIENT = {"no-service", "overloaded", "timeout"}  # errors worth another try
RETRIES = 2
RETRY_DELAY = 0.5  # seconds, doubled on each retry


@dataclass(frozen=True)
class Source:
    path: Path
    id: str
    size: int


@dataclass
class Outcome:
    loaded: int = 0
    bytes: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    chunks: int | None = None  # with --wait: chunks stored of the documents loaded
    graph: bool = False  # with --wait-graph: their graph too

    def fail(self, path: object, why: str) -> None:
        self.failures.append((str(path), " ".join(why.split())))


Load = Callable[[AsyncTrustGraph, Source, bytes, argparse.Namespace], Awaitable[None]]


def load_parser(prog: str, what: str, suffixes: tuple[str, ...]) -> argparse.ArgumentParser:
    arguments = scope_options(parser(prog, (
        f"Load {what} files, or folders of them (searched recursively for "
        f"{', '.join(suffixes)}), into the library and process them on a flow. Document "
        f"ids are the paths relative to each folder given, so loading a folder again "
        f"replaces its documents rather than adding copies.")))
    arguments.add_argument("paths", nargs="+", metavar="PATH", help="files or folders")
    arguments.add_argument("--prefix", default="",
                           help="put in front of every document id, e.g. 'papers/'")
    arguments.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY,
                           help="files loading at once (default %(default)s)")
    arguments.add_argument("--wait", action="store_true", help=(
        "wait until every document's chunks have their vectors stored (searchable), "
        "showing chunks stored per second; documents the pipeline cannot read fail"))
    arguments.add_argument("--wait-graph", action="store_true", help=(
        "as --wait, and then until every chunk's triples and entity vectors are stored "
        "too (graph questions find the documents; extraction often takes longer)"))
    arguments.add_argument("--wait-timeout", type=float, default=DEFAULT_WAIT_TIMEOUT,
                           metavar="SECONDS", help=(
                               "with --wait, give up on the documents still pending when "
                               "none has progressed for this long (default %(default)g)"))
    return arguments


def find_sources(paths: list[str], suffixes: tuple[str, ...], prefix: str,
                 outcome: Outcome) -> list[Source]:
    """Every file to load, once each; paths that cannot be used go to ``outcome``."""
    found: dict[str, Source] = {}
    for given in paths:
        root = Path(given)
        if root.is_dir():
            files = [(path, path.relative_to(root).as_posix())
                     for path in _files_under(root, suffixes)]
        elif root.is_file():
            files = [(root, root.name)]
        else:
            outcome.fail(given, "no such file or folder")
            continue
        for path, name in files:
            id = prefix + name
            if id in found:
                if found[id].path.resolve() != path.resolve():
                    outcome.fail(path, f"document id {id!r} is already taken by "
                                       f"{found[id].path} (use --prefix to tell them apart)")
                continue
            found[id] = Source(path, id, path.stat().st_size)
    return list(found.values())


def _files_under(root: Path, suffixes: tuple[str, ...]) -> list[Path]:
    """Files with one of ``suffixes`` anywhere under ``root``, sorted; names starting
    with ``.`` (files, and folders such as ``.git``, which are not entered) skipped."""
    found = []
    for folder, folders, names in os.walk(root):
        folders[:] = [name for name in folders if not name.startswith(".")]
        found += [Path(folder, name) for name in names if not name.startswith(".")
                  and Path(name).suffix.lower() in suffixes]
    return sorted(found)


class Progress:
    """The bar on stderr and the outcome. Without ``--wait``: files and bytes
    accepted by the librarian. With it: files done (every chunk vector stored) and
    chunks stored per second, from ``waiter``."""

    def __init__(self, prog: str, sources: list[Source], outcome: Outcome,
                 wait: bool) -> None:
        self.prog, self.outcome, self.files = prog, outcome, len(sources)
        self.accepted = 0  # loads answered (with --wait, not yet "loaded")
        self.waiter: Waiter[Source] | None = None  # with --wait, once connected
        self._started = time.monotonic()
        if wait:
            outcome.chunks = 0
            self.bar = tqdm(total=len(sources), unit="file", desc=prog, file=sys.stderr,
                            disable=None, leave=False)
        else:
            self.bar = tqdm(total=sum(s.size for s in sources), unit="B", unit_scale=True,
                            unit_divisor=1024, desc=prog, file=sys.stderr, disable=None,
                            leave=False)
        self.wait = wait

    def loaded(self, source: Source) -> None:
        """The librarian holds it (and, with --wait, the pipeline has it)."""
        self.accepted += 1
        if self.waiter is not None:
            self.waiter.add(source)
        else:
            self._count(source, 0)
            self.bar.update(source.size)
        self.show()

    def failed(self, source: Source, why: str) -> None:
        _failed(self.bar, self.prog, self.outcome, source.path, why)
        self.bar.update(1 if self.wait else source.size)
        self.show()

    def finished(self, source: Source, chunks: int, why: str | None) -> None:
        """With --wait: every chunk of it is stored, or the pipeline failed it."""
        if why is None:
            self._count(source, chunks)
            self.bar.update(1)
            self.show()
        else:
            self.failed(source, why)

    def _count(self, source: Source, chunks: int) -> None:
        self.outcome.loaded += 1
        self.outcome.bytes += source.size
        if self.outcome.chunks is not None:
            self.outcome.chunks += chunks

    def show(self) -> None:
        if self.waiter is None:
            self.bar.set_postfix_str(_files(self.outcome, self.files))
            return
        rate = self.waiter.stored / max(time.monotonic() - self._started, 1e-9)
        graph = f", graph {self.waiter.graph_stored}" if self.waiter.graph else ""
        self.bar.set_postfix_str(
            f"accepted {self.accepted}/{self.files}, chunks {self.waiter.stored}/"
            f"{self.waiter.known_chunks} ({rate:.1f}/s){graph}, failed "
            f"{len(self.outcome.failures)}")

    def close(self) -> None:
        self.bar.close()


async def load_all(args: argparse.Namespace, prog: str, sources: list[Source], load: Load,
                   outcome: Outcome) -> None:
    """Load every source, ``args.concurrency`` at a time (and, with ``--wait``,
    follow them down the pipeline); a failure is reported and the rest carry on.
    The gateway unreachable, or the load service missing before anything loaded,
    stops the whole run."""
    slots = asyncio.Semaphore(max(1, args.concurrency))
    args.wait = args.wait or args.wait_graph
    progress = Progress(prog, sources, outcome, args.wait)

    async def one(client: AsyncTrustGraph, source: Source) -> None:
        async with slots:
            try:
                data = await asyncio.to_thread(source.path.read_bytes)
                await _with_retries(lambda: load(client, source, data, args))
            except TrustGraphError as error:
                if error.type == "connection" or (error.type == "no-service"
                                                  and not progress.accepted):
                    raise  # nothing else will load either: stop here
                progress.failed(source, f"{error.type}: {error.message}")
            except (OSError, ValueError) as error:
                progress.failed(source, _reason(error))
            else:
                progress.loaded(source)

    try:
        async with connect(args) as client:
            await client.connect()
            if args.wait:
                progress.waiter = Waiter(client, args.user, args.collection, args.flow_id,
                                         args.wait_timeout, progress.finished, progress.show,
                                         graph=args.wait_graph)
                outcome.graph = args.wait_graph
            progress.show()
            async with asyncio.TaskGroup() as group:
                loads = [group.create_task(one(client, source)) for source in sources]
                if progress.waiter is not None:
                    group.create_task(progress.waiter.follow(
                        lambda: not all(task.done() for task in loads)))
    except* Exception as stopped:  # the first failure that stopped the run, as itself
        raise stopped.exceptions[0] from None
    finally:
        progress.close()


async def _with_retries(load: Callable[[], Awaitable[None]]) -> None:
    """A load failing for a passing reason is sent again (a load is idempotent):
    ``overloaded``, ``timeout``, and ``no-service``, which a request lost on the
    bus also gives (seen while multi-megabyte uploads are in flight)."""
    for attempt in range(RETRIES + 1):
        try:
            return await load()
        except TrustGraphError as error:
            if error.type not in TRANSIENT or attempt == RETRIES:
                raise
            await asyncio.sleep(RETRY_DELAY * 2**attempt)


def _failed(bar: tqdm, prog: str, outcome: Outcome, path: Path, why: str) -> None:
    outcome.fail(path, why)
    bar.write(f"{prog}: {path}: {' '.join(why.split())}", file=sys.stderr)


def _reason(error: Exception) -> str:
    if isinstance(error, UnicodeDecodeError):
        return f"not UTF-8 text (byte {error.start}: {error.reason})"
    if isinstance(error, OSError):
        return f"cannot read: {error.strerror or error}"
    return str(error)


def _files(outcome: Outcome, total: int) -> str:
    done = outcome.loaded + len(outcome.failures)
    return f"files {done}/{total}, failed {len(outcome.failures)}"


def summary(outcome: Outcome, seconds: float) -> str:
    files = f"loaded {outcome.loaded} file{'s' * (outcome.loaded != 1)} ({size(outcome.bytes)})"
    failed = f"{len(outcome.failures)} failed"
    if outcome.chunks is not None:  # --wait: the chunks are what took the time
        rate = outcome.chunks / seconds if seconds > 0 else 0.0
        graph = " with their graph" if outcome.graph else ""
        return (f"{files}, {outcome.chunks} chunk{'s' * (outcome.chunks != 1)} stored"
                f"{graph}, in {seconds:.1f} s ({rate:.1f} chunks/s); {failed}")
    rate = outcome.bytes / seconds if seconds > 0 else 0.0
    return f"{files} in {seconds:.1f} s ({size(rate)}/s); {failed}"


def size(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def run_loader(prog: str, args: argparse.Namespace, suffixes: tuple[str, ...],
               load: Load) -> int:
    """The whole command: find, load, summarise; non-zero when anything failed."""
    outcome = Outcome()
    sources = find_sources(args.paths, suffixes, args.prefix, outcome)
    for path, why in outcome.failures:
        print(f"{prog}: {path}: {why}", file=sys.stderr, flush=True)
    started = time.monotonic()
    code = run(prog, load_all(args, prog, sources, load, outcome)) if sources else 0
    print(summary(outcome, time.monotonic() - started), flush=True)
    if code == 0 and not sources and not outcome.failures:
        print(f"{prog}: nothing to load (no {', '.join(suffixes)} files found)",
              file=sys.stderr, flush=True)
        return EXIT_ERROR
    return code or (EXIT_ERROR if outcome.failures else 0)
