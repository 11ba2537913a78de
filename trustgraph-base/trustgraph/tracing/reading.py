"""Reading the trace store (``store.py``): recent traces, one trace's spans, and
the retrieval explanations kept with them, as plain JSON-ready dicts (what
``GET /api/v1/traces`` and ``/api/v1/explain`` answer).

``user``, where given, limits what is read to that user's traces (a trace is a
user's when one of its spans names them, as the gateway's does for the caller)."""
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .store import connect


def iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat(timespec="milliseconds")


class TraceReader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None

    def _open(self) -> sqlite3.Connection | None:
        if self._db is None and self.path.exists():
            self._db = connect(self.path)
        return self._db

    def recent(self, limit: int = 20, user: str | None = None) -> list[dict[str, Any]]:
        """The latest traces, newest first: id, start, duration, root span, user,
        span and error counts."""
        db = self._open()
        if db is None:
            return []
        rows = db.execute(
            "SELECT trace_id, start_ns, end_ns, root, user, spans, errors FROM traces "
            "WHERE ? IS NULL OR user = ? ORDER BY start_ns DESC LIMIT ?",
            (user, user, limit)).fetchall()
        return [{"trace_id": t, "start": iso(start), "duration_ms": round((end - start) / 1e6, 3),
                 "root": root, "user": who, "spans": spans, "errors": errors}
                for t, start, end, root, who, spans, errors in rows]

    def trace(self, trace_id: str, user: str | None = None) -> dict[str, Any] | None:
        """A trace's spans in start order, each timed from the trace's start; None
        when there is no such trace (or it is not ``user``'s)."""
        db = self._open()
        if db is None or not self._visible(db, trace_id, user):
            return None
        rows = db.execute(
            "SELECT span_id, parent_id, name, service, kind, start_ns, end_ns, status, "
            "status_message, attributes, events FROM spans WHERE trace_id = ? "
            "ORDER BY start_ns", (trace_id,)).fetchall()
        if not rows:
            return None
        zero = rows[0][5]
        spans = [{"span_id": span, "parent_id": parent, "name": name, "service": service,
                  "kind": kind, "start_ms": round((start - zero) / 1e6, 3),
                  "duration_ms": round((end - start) / 1e6, 3), "status": status,
                  "status_message": message, "attributes": json.loads(attributes),
                  "events": json.loads(events)}
                 for span, parent, name, service, kind, start, end, status, message,
                 attributes, events in rows]
        explained = db.execute("SELECT 1 FROM explanations WHERE trace_id = ?",
                               (trace_id,)).fetchone() is not None
        return {"trace_id": trace_id, "start": iso(zero), "spans": spans,
                "explained": explained}

    def explanations(self, limit: int = 50, user: str | None = None,
                     collection: str | None = None) -> list[dict[str, Any]]:
        """The latest answers with an explanation, newest first."""
        db = self._open()
        if db is None:
            return []
        rows = db.execute(
            "SELECT trace_id, start_ns, service, user, collection, question FROM "
            "explanations WHERE (? IS NULL OR user = ?) AND (? IS NULL OR collection = ?) "
            "ORDER BY start_ns DESC LIMIT ?",
            (user, user, collection, collection, limit)).fetchall()
        return [{"trace_id": t, "time": iso(start), "service": service, "user": who,
                 "collection": coll, "question": question}
                for t, start, service, who, coll, question in rows]

    def explanation(self, trace_id: str, user: str | None = None) -> dict[str, Any] | None:
        db = self._open()
        if db is None:
            return None
        row = db.execute(
            "SELECT start_ns, service, user, collection, body FROM explanations "
            "WHERE trace_id = ? AND (? IS NULL OR user = ?)",
            (trace_id, user, user)).fetchone()
        if row is None:
            return None
        start, service, who, collection, body = row
        return {"trace_id": trace_id, "time": iso(start), "service": service, "user": who,
                "collection": collection, **json.loads(body)}

    @staticmethod
    def _visible(db: sqlite3.Connection, trace_id: str, user: str | None) -> bool:
        if user is None:
            return True
        found = db.execute("SELECT user FROM traces WHERE trace_id = ?", (trace_id,)).fetchone()
        return found is not None and found[0] == user

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
