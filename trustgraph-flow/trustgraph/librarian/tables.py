"""The library's SQLite tables, and bringing a library made by an older release up
to date."""
import sqlite3

SCHEMA = """
CREATE TABLE IF NOT EXISTS document (
    user       TEXT NOT NULL,
    collection TEXT NOT NULL,
    id         TEXT NOT NULL,
    title      TEXT NOT NULL,
    kind       TEXT NOT NULL,
    comments   TEXT NOT NULL,
    tags       TEXT NOT NULL,   -- JSON list
    size       INTEGER NOT NULL,
    sha256     TEXT NOT NULL,
    time       INTEGER NOT NULL,
    PRIMARY KEY (user, collection, id)
);
CREATE TABLE IF NOT EXISTS upload (
    id          TEXT PRIMARY KEY,  -- random hex, made here
    user        TEXT NOT NULL,
    collection  TEXT NOT NULL,
    document_id TEXT NOT NULL,
    title       TEXT NOT NULL,
    kind        TEXT NOT NULL,
    comments    TEXT NOT NULL,
    tags        TEXT NOT NULL,
    size        INTEGER NOT NULL,
    time        INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS processing (
    user        TEXT NOT NULL,
    collection  TEXT NOT NULL,
    document_id TEXT NOT NULL,
    flow        TEXT NOT NULL,
    time        INTEGER NOT NULL,
    PRIMARY KEY (user, collection, document_id, flow)
);
"""

# Columns added after the first release, added to a library made before them (under
# the write lock, so processes opening one library at once add each only once).
# processing.chunks is NULL until the decoder has cut that version into chunks.
ADDED_COLUMNS = (("document", "version", "INTEGER NOT NULL DEFAULT 0"),
                 ("processing", "version", "INTEGER NOT NULL DEFAULT 0"),
                 ("processing", "chunks", "INTEGER"),
                 ("processing", "error", "TEXT"))


def add_missing_columns(db: sqlite3.Connection) -> None:
    for table, column, declaration in ADDED_COLUMNS:
        present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if column not in present:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
