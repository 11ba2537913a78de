"""How far each loaded document's graph has got, for ``load-status``: the chunks of
its current version whose triples the triples store holds, and those whose entity
vectors the vector store holds.

The store owners say so once their write is durable (stage ``graph-progress``, a
``GraphProgress`` per chunk and part); the librarian keeps one row per (document,
version, chunk, part) in a file of its own beside the library, so a report sent
twice (a redelivery) counts once. A report for a version that is no longer the one
being processed on that flow (a re-load overtook it, or the document was removed)
is dropped, and removing a document forgets its rows. Reports that arrive while a
write is under way are written together, in one transaction (one write per report
cost the librarian ~3 ms of CPU per chunk).
"""
import asyncio
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from trustgraph.base import StageContext, StageHandler
from trustgraph.schema import GraphProgress
from trustgraph.sqlite_transaction import transaction

from .store import LibraryStore

SCHEMA = """
CREATE TABLE IF NOT EXISTS graph_progress (
    user       TEXT NOT NULL,
    collection TEXT NOT NULL,
    flow       TEXT NOT NULL,
    document   TEXT NOT NULL,
    version    INTEGER NOT NULL,
    chunk      TEXT NOT NULL,
    part       TEXT NOT NULL,   -- "triples" or "entities"
    PRIMARY KEY (user, collection, flow, document, version, chunk, part)
);
"""


class GraphProgressStore:
    def __init__(self, root: Path) -> None:
        self.path = root / "graph-progress.db"
        with closing(sqlite3.connect(self.path, timeout=30)) as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(SCHEMA)

    @contextmanager
    def _transaction(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        with closing(sqlite3.connect(self.path, timeout=30, isolation_level=None)) as db:
            db.execute("PRAGMA synchronous=NORMAL")  # a lost report is sent again
            with transaction(db, write):
                yield db

    def record(self, reports: list[tuple[str, GraphProgress]]) -> None:
        """``(flow, report)`` pairs, in one transaction."""
        with self._transaction(write=True) as db:
            for flow, report in reports:
                d = report.document
                db.execute("INSERT OR IGNORE INTO graph_progress VALUES (?, ?, ?, ?, ?, ?, ?)",
                           (d.user, d.collection, flow, d.id, d.version, report.chunk_id,
                            report.part))
                # Rows of earlier versions say nothing any more.
                db.execute("DELETE FROM graph_progress WHERE user = ? AND collection = ? AND "
                           "flow = ? AND document = ? AND version < ?",
                           (d.user, d.collection, flow, d.id, d.version))

    def counts(self, user: str, collection: str, flow: str,
               versions: dict[str, int]) -> dict[str, dict[str, int]]:
        """For each document of ``versions`` (id → version): chunks per part."""
        found: dict[str, dict[str, int]] = {id: {} for id in versions}
        with self._transaction() as db:
            for id, version in versions.items():
                for part, count in db.execute(
                        "SELECT part, count(*) FROM graph_progress WHERE user = ? AND "
                        "collection = ? AND flow = ? AND document = ? AND version = ? "
                        "GROUP BY part", (user, collection, flow, id, version)):
                    found[id][part] = count
        return found

    def forget(self, user: str, collection: str, document: str | None = None) -> None:
        """A removed document's rows; with no ``document``, a deleted collection's."""
        with self._transaction(write=True) as db:
            db.execute("DELETE FROM graph_progress WHERE user = ? AND collection = ? AND "
                       "(? IS NULL OR document = ?)", (user, collection, document, document))


def current(library: LibraryStore, reports: list[tuple[str, GraphProgress]]
            ) -> list[tuple[str, GraphProgress]]:
    """The reports about the version being processed on their flow (not removed, not
    overtaken by a re-load)."""
    asked: dict[tuple[str, str, str], set[str]] = {}
    for flow, report in reports:
        d = report.document
        asked.setdefault((d.user, d.collection, flow), set()).add(d.id)
    versions = {(user, collection, flow, id): record.version
                for (user, collection, flow), ids in asked.items()
                for id, record in library.load_status(user, collection, sorted(ids),
                                                      flow).items()}
    return [(flow, report) for flow, report in reports
            if versions.get((report.document.user, report.document.collection, flow,
                             report.document.id)) == report.document.version]


class Together:
    """Calls of ``write`` (blocking: run in a thread) with what arrived while the
    last was under way; each ``add`` returns once its item is written."""

    def __init__(self, write: Callable[[list], None]) -> None:
        self._write = write
        self._waiting: list[tuple[object, asyncio.Future]] = []
        self._writing: asyncio.Task | None = None

    async def add(self, item: object) -> None:
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        if self._writing is None or self._writing.done():
            self._writing = asyncio.create_task(self._drain())
        await future

    async def _drain(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, []
            try:
                await asyncio.to_thread(self._write, [item for item, _ in batch])
            except Exception as error:  # every report of the batch is redelivered
                for _, future in batch:
                    if not future.done():
                        future.set_exception(error)
            else:
                for _, future in batch:
                    if not future.done():
                        future.set_result(None)


def progress_stage(progress: GraphProgressStore, library: LibraryStore
                   ) -> StageHandler[GraphProgress]:
    writes = Together(lambda reports: progress.record(current(library, reports)))

    async def graph_progress(report: GraphProgress, ctx: StageContext) -> None:
        await writes.add((ctx.flow, report))
    return graph_progress
