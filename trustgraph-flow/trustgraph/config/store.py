"""Typed, versioned configuration in one SQLite file.

Items are ``(type, key) -> JSON value``; ``version`` counts changes (one per put or
delete operation, whatever its size). Each operation opens its own short-lived
connection: config traffic is light, and it leaves nothing to close or to share
between the threads ``asyncio.to_thread`` runs these methods on. The database is in
WAL mode, so readers never wait for a writer.
"""
import json
import sqlite3
from pathlib import Path
from typing import Any

from trustgraph.base import HandledError
from trustgraph.schema import ConfigKey, ConfigValue
from trustgraph.sqlite_transaction import SqliteFile

SCHEMA = """
CREATE TABLE IF NOT EXISTS item (
    type  TEXT NOT NULL,
    key   TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (type, key)
);
CREATE TABLE IF NOT EXISTS version (
    one   INTEGER PRIMARY KEY CHECK (one = 1),
    value INTEGER NOT NULL
);
INSERT OR IGNORE INTO version (one, value) VALUES (1, 0);
"""


class NotFound(HandledError):
    def __init__(self, keys: list[ConfigKey]) -> None:
        names = ", ".join(f"{k.type}/{k.key}" for k in keys)
        super().__init__("not-found", f"no config item {names}")


class ConfigStore:
    def __init__(self, path: str | Path) -> None:
        self._db = SqliteFile(path, SCHEMA)

    @staticmethod
    def _version(db: sqlite3.Connection) -> int:
        return db.execute("SELECT value FROM version").fetchone()[0]

    @staticmethod
    def _bump(db: sqlite3.Connection) -> int:
        db.execute("UPDATE version SET value = value + 1")
        return ConfigStore._version(db)

    def version(self) -> int:
        with self._db.transaction() as db:
            return self._version(db)

    def get(self, keys: list[ConfigKey], missing_ok: bool = False
            ) -> tuple[list[ConfigValue], int]:
        """The items of ``keys``, in order; one that does not exist is ``NotFound``,
        or with ``missing_ok`` left out."""
        with self._db.transaction() as db:
            found, missing = [], []
            for k in keys:
                row = db.execute("SELECT value FROM item WHERE type = ? AND key = ?",
                                 (k.type, k.key)).fetchone()
                if row is None:
                    missing.append(k)
                else:
                    found.append(ConfigValue(type=k.type, key=k.key, value=json.loads(row[0])))
            if missing and not missing_ok:
                raise NotFound(missing)
            return found, self._version(db)

    def keys(self, type: str) -> tuple[list[str], int]:
        with self._db.transaction() as db:
            rows = db.execute("SELECT key FROM item WHERE type = ? ORDER BY key", (type,))
            return [key for key, in rows], self._version(db)

    def values(self, type: str) -> tuple[list[ConfigValue], int]:
        with self._db.transaction() as db:
            rows = db.execute("SELECT key, value FROM item WHERE type = ? ORDER BY key",
                              (type,))
            values = [ConfigValue(type=type, key=key, value=json.loads(value))
                      for key, value in rows]
            return values, self._version(db)

    def everything(self) -> tuple[dict[str, dict[str, Any]], int]:
        with self._db.transaction() as db:
            config: dict[str, dict[str, Any]] = {}
            for type, key, value in db.execute(
                    "SELECT type, key, value FROM item ORDER BY type, key"):
                config.setdefault(type, {})[key] = json.loads(value)
            return config, self._version(db)

    def types(self) -> list[str]:
        with self._db.transaction() as db:
            return [t for t, in db.execute("SELECT DISTINCT type FROM item ORDER BY type")]

    def put(self, values: list[ConfigValue]) -> int:
        with self._db.transaction(write=True) as db:
            db.executemany(
                "INSERT INTO item (type, key, value) VALUES (?, ?, ?) "
                "ON CONFLICT (type, key) DO UPDATE SET value = excluded.value",
                [(v.type, v.key, json.dumps(v.value)) for v in values])
            return self._bump(db)

    def insert(self, value: ConfigValue, taken: str) -> int:
        """Store a new item; when its key is taken, ``conflict`` saying ``taken``."""
        with self._db.transaction(write=True) as db:
            added = db.execute("INSERT OR IGNORE INTO item (type, key, value) VALUES (?, ?, ?)",
                               (value.type, value.key, json.dumps(value.value))).rowcount
            if not added:
                raise HandledError("conflict", taken)
            return self._bump(db)

    def add_missing(self, values: list[ConfigValue]) -> int | None:
        """Store those of ``values`` whose keys are free, in one change; the new
        version, or None when every key was taken (nothing changed). Into a fresh
        store (version 0, which nobody can have read yet) they go as part of version
        0: a fresh store starts with them."""
        with self._db.transaction(write=True) as db:
            added = sum(db.execute(
                "INSERT OR IGNORE INTO item (type, key, value) VALUES (?, ?, ?)",
                (v.type, v.key, json.dumps(v.value))).rowcount for v in values)
            if not added:
                return None
            version = self._version(db)
            return self._bump(db) if version else version

    def delete(self, keys: list[ConfigKey]) -> int:
        """Deletes all of ``keys`` or, when any is unknown, none of them."""
        with self._db.transaction(write=True) as db:
            missing = [k for k in keys if db.execute(
                "DELETE FROM item WHERE type = ? AND key = ?", (k.type, k.key)).rowcount == 0]
            if missing:
                raise NotFound(missing)
            return self._bump(db)
