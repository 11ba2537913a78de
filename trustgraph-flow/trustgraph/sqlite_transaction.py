"""One SQLite transaction, as every store here takes it: the connection is in
autocommit mode (``isolation_level=None``) and the transaction is begun explicitly,
so a read sees one snapshot and a write takes the write lock up front (no
read-to-write upgrade, so no deadlock between two writers)."""
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def transaction(db: sqlite3.Connection, write: bool = False) -> Iterator[sqlite3.Connection]:
    db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
