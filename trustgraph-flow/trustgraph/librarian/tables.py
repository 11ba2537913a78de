"""The library's SQLite tables, and bringing a library made by an older release up
to date."""
import sqlite3
import time

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
CREATE TABLE IF NOT EXISTS collection (
    user        TEXT NOT NULL,
    collection  TEXT NOT NULL,
    name        TEXT NOT NULL,
    description TEXT NOT NULL,
    tags        TEXT NOT NULL,   -- JSON list
    time        INTEGER NOT NULL,  -- when first set or loaded into
    PRIMARY KEY (user, collection)
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


def add_missing_collections(db: sqlite3.Connection) -> None:
    """A collection for each one a library made before collections were kept holds
    documents in (a load now makes its collection as it stores the document)."""
    db.execute("INSERT OR IGNORE INTO collection (user, collection, name, description, "
               "tags, time) SELECT user, collection, '', '', '[]', min(time) FROM document "
               "GROUP BY user, collection")


def ensure_collection(db: sqlite3.Connection, user: str, collection: str) -> None:
    """The collection's row, made (unnamed) unless it is there already: storing a
    document makes its collection, in the same write transaction."""
    db.execute("INSERT OR IGNORE INTO collection (user, collection, name, description, "
               "tags, time) VALUES (?, ?, '', '', '[]', ?)",
               (user, collection, int(time.time())))
