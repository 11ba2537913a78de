"""Conversation memory: the turns of each session, in SQLite under the data dir.

A turn (question, answer) is keyed by ``(user, session_id)``: the same session id
used by another user is another, empty, conversation, so no user ever reads another's
turns. The dialog saves a turn only once its answer is complete (seed 004): a client
that goes away mid-answer cancels the dialog before that point, and leaves nothing.

SQLite calls are short but blocking; they run on a thread so the event loop keeps
streaming other requests meanwhile.
"""
import asyncio
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS turns (
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- the order turns were saved in
    user TEXT NOT NULL,
    session_id TEXT NOT NULL,
    question TEXT NOT NULL,
    answer TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS turns_of_session ON turns (user, session_id, id);
"""


@dataclass(frozen=True)
class Turn:
    question: str
    answer: str


class SessionStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # One connection, used from one worker thread at a time (the lock), so the
        # writes of concurrent dialogs never interleave inside a transaction.
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA)
        self._lock = asyncio.Lock()

    async def turns(self, user: str, session_id: str, limit: int) -> list[Turn]:
        """The last ``limit`` turns, oldest first."""
        rows = await self._run(
            "SELECT question, answer FROM turns WHERE user = ? AND session_id = ? "
            "ORDER BY id DESC LIMIT ?", (user, session_id, limit))
        return [Turn(question, answer) for question, answer in reversed(rows)]

    async def save(self, user: str, session_id: str, question: str, answer: str) -> None:
        # One row per turn, numbered by SQLite: replicas sharing the file never
        # collide on a number, whatever turns they save at once.
        await self._run(
            "INSERT INTO turns (user, session_id, question, answer, created) "
            "VALUES (?, ?, ?, ?, ?)", (user, session_id, question, answer, time.time()))

    async def _run(self, sql: str, parameters: tuple) -> list[tuple]:
        async with self._lock:
            return await asyncio.to_thread(
                lambda: self._db.execute(sql, parameters).fetchall())

    def close(self) -> None:
        self._db.close()

    async def aclose(self) -> None:
        async with self._lock:  # after the write in hand, if any
            self.close()
