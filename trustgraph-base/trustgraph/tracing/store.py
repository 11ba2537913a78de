"""The trace store: recent spans in one SQLite file in the data dir, bounded by
size, the oldest traces dropped first.

Every traced process writes its own spans here (``exporter.py``, from its span
processor's thread; SQLite's WAL lets them write side by side) and the gateway reads
them (``GET /api/v1/traces``, the workbench, ``tg-show-trace``). A trace's row sums
its spans' sizes, so the bound is kept by dropping whole traces, never half of one;
freed pages are given back (incremental vacuum), so the file stays near the bound.

A span's ``tg.explain`` attribute (a RAG answer's retrieval explanation) is kept in
a table of its own, beside its trace, for ``tg-list-explain-traces``.
"""
import json
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS spans (
    trace_id TEXT NOT NULL, span_id TEXT NOT NULL, parent_id TEXT, name TEXT NOT NULL,
    service TEXT NOT NULL, kind TEXT NOT NULL, start_ns INTEGER NOT NULL,
    end_ns INTEGER NOT NULL, status TEXT NOT NULL, status_message TEXT,
    attributes TEXT NOT NULL, events TEXT NOT NULL,
    PRIMARY KEY (trace_id, span_id));
CREATE TABLE IF NOT EXISTS traces (
    trace_id TEXT PRIMARY KEY, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
    root TEXT, user TEXT, spans INTEGER NOT NULL, errors INTEGER NOT NULL,
    bytes INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS traces_by_start ON traces (start_ns);
CREATE TABLE IF NOT EXISTS explanations (
    trace_id TEXT PRIMARY KEY, span_id TEXT NOT NULL, start_ns INTEGER NOT NULL,
    service TEXT NOT NULL, user TEXT, collection TEXT, question TEXT,
    body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS explanations_by_start ON explanations (start_ns);
"""
# Written bytes between checks of the bound: a check sums a column of the traces.
CHECK_EVERY_FRACTION = 0.05
KEEP_FRACTION = 0.9  # pruned down to this share of the bound, so it is not pruned per write
BUSY_MS = 5000  # another process writing: wait this long for it


@dataclass
class SpanRow:
    """One finished span as the store keeps it."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    service: str
    kind: str
    start_ns: int
    end_ns: int
    status: str  # UNSET, OK or ERROR
    status_message: str | None
    attributes: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    explanation: str | None = None  # the ``tg.explain`` JSON, kept apart

    def size(self) -> int:
        return 200 + len(self.name) + len(json.dumps(self.attributes)) + \
            len(json.dumps(self.events)) + len(self.explanation or "")


def connect(path: Path, readonly: bool = False) -> sqlite3.Connection:
    if readonly:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False,
                             timeout=BUSY_MS / 1000)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, check_same_thread=False, timeout=BUSY_MS / 1000)
        db.execute("PRAGMA auto_vacuum = INCREMENTAL")  # only takes on a new file
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")  # traces are worth less than a write per span
        db.executescript(SCHEMA)
    return db


class TraceWriter:
    """Writes spans and keeps the bound (one per process: its exporter's)."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._db = connect(path)
        self._written = 0
        self._lock = threading.Lock()  # the span thread writes; shutdown may flush from another

    def write(self, rows: list[SpanRow]) -> None:
        with self._lock, self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO spans VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                [(r.trace_id, r.span_id, r.parent_id, r.name, r.service, r.kind, r.start_ns,
                  r.end_ns, r.status, r.status_message, json.dumps(r.attributes),
                  json.dumps(r.events)) for r in rows])
            self._db.executemany(
                "INSERT INTO traces VALUES (?,?,?,?,?,1,?,?) ON CONFLICT (trace_id) DO UPDATE "
                "SET start_ns = min(start_ns, excluded.start_ns), "
                "end_ns = max(end_ns, excluded.end_ns), root = coalesce(excluded.root, root), "
                "user = coalesce(user, excluded.user), spans = spans + 1, "
                "errors = errors + excluded.errors, bytes = bytes + excluded.bytes",
                [(r.trace_id, r.start_ns, r.end_ns, None if r.parent_id else r.name,
                  r.attributes.get("tg.user"), int(r.status == "ERROR"), r.size())
                 for r in rows])
            self._db.executemany(
                "INSERT OR REPLACE INTO explanations VALUES (?,?,?,?,?,?,?,?)",
                [(r.trace_id, r.span_id, r.start_ns, r.service, r.attributes.get("tg.user"),
                  r.attributes.get("tg.collection"), r.attributes.get("input.value"),
                  r.explanation) for r in rows if r.explanation])
            self._written += sum(r.size() for r in rows)
            pruned = False
            if self._written > self.max_bytes * CHECK_EVERY_FRACTION:
                self._written = 0
                pruned = self._prune()
        if pruned:  # outside the transaction: the freed pages go back to the file system
            with self._lock:
                self._db.execute("PRAGMA incremental_vacuum")

    def _prune(self) -> bool:
        """Whole traces, oldest first, until the store is back under its bound."""
        total = self._db.execute("SELECT coalesce(sum(bytes), 0) FROM traces").fetchone()[0]
        if total <= self.max_bytes:
            return False
        dropped, excess = [], total - self.max_bytes * KEEP_FRACTION
        for trace_id, size in self._db.execute(
                "SELECT trace_id, bytes FROM traces ORDER BY start_ns"):
            if excess <= 0:
                break
            dropped.append((trace_id,))
            excess -= size
        for table in ("spans", "explanations", "traces"):
            self._db.executemany(f"DELETE FROM {table} WHERE trace_id = ?", dropped)
        return True

    def close(self) -> None:
        with self._lock:
            self._db.close()
