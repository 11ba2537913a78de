"""How far each loaded document's graph has got, for ``load-status``: the chunks of
its current version whose triples the triples store holds, and those whose entity
vectors the vector store holds.

The store owners say so once their write is durable (stage ``graph-progress``, a
``GraphProgress`` per chunk and part); the librarian keeps one row per (document,
version, chunk, part) in a file of its own beside the library, so a report sent
twice (a redelivery) counts once. A report for a version that is no longer the one
being processed on that flow (a re-load overtook it, or the document was removed)
is dropped, and removing a document forgets its rows.
"""
import asyncio
import sqlite3
from collections.abc import Iterator
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

    def record(self, user: str, collection: str, flow: str, document: str, version: int,
               chunk: str, part: str) -> None:
        with self._transaction(write=True) as db:
            db.execute("INSERT OR IGNORE INTO graph_progress VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (user, collection, flow, document, version, chunk, part))
            # Rows of earlier versions say nothing any more.
            db.execute("DELETE FROM graph_progress WHERE user = ? AND collection = ? AND "
                       "flow = ? AND document = ? AND version < ?",
                       (user, collection, flow, document, version))

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

    def forget(self, user: str, collection: str, document: str) -> None:
        with self._transaction(write=True) as db:
            db.execute("DELETE FROM graph_progress WHERE user = ? AND collection = ? AND "
                       "document = ?", (user, collection, document))


def progress_stage(progress: GraphProgressStore, library: LibraryStore
                   ) -> StageHandler[GraphProgress]:
    def record(report: GraphProgress, flow: str) -> None:
        document = report.document
        current = library.load_status(document.user, document.collection, [document.id],
                                      flow).get(document.id)
        if current is None or current.version != document.version:
            return  # removed, or a later version is on its way: nothing to count
        progress.record(document.user, document.collection, flow, document.id,
                        document.version, report.chunk_id, report.part)

    async def graph_progress(report: GraphProgress, ctx: StageContext) -> None:
        await asyncio.to_thread(record, report, ctx.flow)
    return graph_progress
