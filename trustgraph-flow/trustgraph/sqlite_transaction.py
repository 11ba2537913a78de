"""One SQLite transaction, as every store here takes it: the connection is in
autocommit mode (``isolation_level=None``) and the transaction is begun explicitly,
so a read sees one snapshot and a write takes the write lock up front (no
read-to-write upgrade, so no deadlock between two writers)."""
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path


@contextmanager
def transaction(db: sqlite3.Connection, write: bool = False) -> Iterator[sqlite3.Connection]:
    db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


class SqliteFile:
    """A database file made from its schema once, then opened afresh for each
    transaction: a connection is never shared between the threads that call a store."""

    def __init__(self, path: str | Path, schema: str, timeout: float = 10) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(self.path, timeout=timeout)) as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(schema)

    @contextmanager
    def transaction(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        with closing(sqlite3.connect(self.path, timeout=self.timeout,
                                     isolation_level=None)) as db, transaction(db, write):
            yield db
