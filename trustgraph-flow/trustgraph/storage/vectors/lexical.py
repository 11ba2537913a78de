"""The lexical index beside the chunk vectors: BM25 over each chunk's words, its
document title and heading path, one index per (user, collection) like the vector
spaces (store.py), so one scope's query can never reach another's chunks and each
scope's term statistics (IDF) are its own.

This module is the embedded backend, SQLite FTS5 in the data dir (nothing to
install: FTS5 is part of the SQLite that Python ships), with the Porter stemmer, so
"founded" matches "founding". qdrant_sparse.py is the same contract on a Qdrant
server. Rows are keyed by chunk id, so a redelivered chunk overwrites itself.
"""
import asyncio
import hashlib
import json
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from trustgraph.base import LaneLock

from ...sqlite_transaction import transaction
from .matches import ChunkMatch
from .spaces import Space

LEXICAL = "lexical"
# Words so common that matching them says nothing; leaving them out of the OR query
# keeps it from touching every row.
STOPWORDS = frozenset("""a an and are as at be but by did do does for from had has have
how i if in into is it its of on or so such than that the their them then there these
they this to was were what when where which who whom whose why will with would you your
""".split())
# BM25 weight of a match in each indexed column: a word of the title or heading path
# counts for more than one in the body, as it describes the whole chunk.
WEIGHTS = {"title": 2.0, "headings": 1.5, "body": 1.0}
# Up to this many chunks, a question whose every word is in over half of them is
# scored on those words anyway (a few ms); beyond it, not at all (``_selective``).
COMMON_WORDS_SCORED = 1000


@dataclass(frozen=True)
class LexicalChunk:
    """One chunk as indexed: ``meta`` holds its citation details (page range, heading
    path, character range, author), returned as stored."""

    chunk_id: str
    document: str
    text: str
    title: str = ""
    headings: str = ""  # the heading path as text ("Install > From source")
    version: int = 0
    index: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)


class LexicalIndex(Protocol):
    async def upsert(self, user: str, collection: str,
                     chunks: Sequence[LexicalChunk]) -> None: ...
    async def search(self, user: str, collection: str, query: str,
                     limit: int) -> list[ChunkMatch]: ...
    async def remove_document(self, user: str, collection: str, document: str) -> None: ...
    async def remove_stale(self, user: str, collection: str, document: str, version: int,
                           total: int) -> int: ...
    async def delete_collection(self, user: str, collection: str) -> None: ...
    async def count(self, user: str, collection: str) -> int: ...
    async def close(self) -> None: ...


def query_terms(query: str) -> list[str]:
    """The words of a question worth matching, lower-cased, each once, in order."""
    words = re.findall(r"\w+", query.lower())
    return list(dict.fromkeys(w for w in words if w not in STOPWORDS))


def row_id(chunk_id: str) -> int:
    """A chunk's rowid: stable, so an upsert replaces the chunk's earlier row."""
    return int.from_bytes(hashlib.sha256(chunk_id.encode()).digest()[:8], "big") >> 1


class Fts5Index:
    """FTS5 tables in one SQLite file, one per scope; a plain ``chunks`` table maps
    each row to its document and version, for removal."""

    def __init__(self, path: str | Path, weights: dict[str, float] | None = None):
        """``weights``: BM25's weight of a match in each column (default ``WEIGHTS``)."""
        self._weights = {**WEIGHTS, **(weights or {})}
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS chunks (space TEXT, row INTEGER, "
                         "document TEXT, version INTEGER, idx INTEGER, "
                         "PRIMARY KEY (space, row))")
        self._db.execute("CREATE INDEX IF NOT EXISTS chunks_document ON chunks "
                         "(space, document)")
        # One connection: one statement at a time, a question's before a load's.
        self._lock = LaneLock()
        self._tables: set[str] = set()

    async def _run(self, function, *args):
        async with self._lock:
            return await asyncio.to_thread(function, *args)

    def _table(self, user: str, collection: str, create: bool) -> str | None:
        """The scope's FTS5 table (its name is a hash, never user text)."""
        name = Space(LEXICAL, user, collection).name.replace("-", "_")
        if name not in self._tables:
            exists = self._db.execute("SELECT 1 FROM sqlite_master WHERE name = ?",
                                      (name,)).fetchone()
            if not exists and not create:
                return None
            self._db.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING fts5(title, headings, "
                f"body, chunk_id UNINDEXED, document UNINDEXED, meta UNINDEXED, "
                f"tokenize = 'porter unicode61 remove_diacritics 2')")
            self._tables.add(name)
        return name

    async def upsert(self, user: str, collection: str,
                     chunks: Sequence[LexicalChunk]) -> None:
        if chunks:
            await self._run(self._upsert, user, collection, chunks)

    def _upsert(self, user: str, collection: str, chunks: Sequence[LexicalChunk]) -> None:
        table = self._table(user, collection, create=True)
        with transaction(self._db, write=True):
            for c in chunks:
                row = row_id(c.chunk_id)
                self._db.execute(f"DELETE FROM {table} WHERE rowid = ?", (row,))
                self._db.execute(
                    f"INSERT INTO {table} (rowid, title, headings, body, chunk_id, document, "
                    f"meta) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (row, c.title, c.headings, c.text, c.chunk_id, c.document,
                     json.dumps(c.meta)))
                self._db.execute("INSERT OR REPLACE INTO chunks VALUES (?, ?, ?, ?, ?)",
                                 (table, row, c.document, c.version, c.index))

    async def search(self, user: str, collection: str, query: str,
                     limit: int) -> list[ChunkMatch]:
        terms = query_terms(query)
        if not terms:
            return []
        return await self._run(self._search, user, collection, terms, limit)

    def _search(self, user: str, collection: str, terms: list[str],
                limit: int) -> list[ChunkMatch]:
        table = self._table(user, collection, create=False)
        if table is None:
            return []
        terms = self._selective(table, terms)
        if not terms:
            return []
        match = " OR ".join(map(_quoted, terms))
        weights = ", ".join(str(self._weights[column]) for column in WEIGHTS)
        rows = self._db.execute(
            f"SELECT chunk_id, document, title, body, meta, bm25({table}, {weights}) AS rank "
            f"FROM {table} WHERE {table} MATCH ? ORDER BY rank LIMIT ?",
            (match, limit)).fetchall()
        return [ChunkMatch(chunk_id, document, title, body, -rank, json.loads(meta))
                for chunk_id, document, title, body, meta, rank in rows]

    def _selective(self, table: str, terms: list[str]) -> list[str]:
        """The terms in at most half the scope's chunks. BM25 gives a word in more
        than half the rows an IDF of ~0 (FTS5 clamps it), so such words only cost
        time: scoring every row they match (160 ms for a word in each of 10k chunks,
        against 4 ms for rare words). A question of such words only is still
        matched in a small scope, where scoring every row is cheap and their term
        frequencies are the only lexical evidence; in a larger one it finds nothing
        by its words, and vector search alone decides."""
        total = self._db.execute("SELECT count(*) FROM chunks WHERE space = ?",
                                 (table,)).fetchone()[0]
        kept = [term for term in terms if 2 * self._db.execute(
            f"SELECT count(*) FROM {table} WHERE {table} MATCH ?",
            (_quoted(term),)).fetchone()[0] <= total]
        return kept or (terms if total <= COMMON_WORDS_SCORED else [])

    async def remove_document(self, user: str, collection: str, document: str) -> None:
        await self._run(self._remove, user, collection,
                        "document = ?", (document,))

    async def remove_stale(self, user: str, collection: str, document: str, version: int,
                           total: int) -> int:
        return await self._run(self._remove, user, collection,
                               "document = ? AND version < ? AND idx >= ?",
                               (document, version, total))

    def _remove(self, user: str, collection: str, where: str, values: tuple) -> int:
        table = self._table(user, collection, create=False)
        if table is None:
            return 0
        with transaction(self._db, write=True):
            rows = [r for (r,) in self._db.execute(
                f"SELECT row FROM chunks WHERE space = ? AND {where}", (table, *values))]
            for row in rows:
                self._db.execute(f"DELETE FROM {table} WHERE rowid = ?", (row,))
                self._db.execute("DELETE FROM chunks WHERE space = ? AND row = ?",
                                 (table, row))
        return len(rows)

    async def delete_collection(self, user: str, collection: str) -> None:
        await self._run(self._drop, user, collection)

    def _drop(self, user: str, collection: str) -> None:
        table = self._table(user, collection, create=False)
        if table is not None:
            with transaction(self._db, write=True):
                self._db.execute(f"DROP TABLE {table}")
                self._db.execute("DELETE FROM chunks WHERE space = ?", (table,))
            self._tables.discard(table)

    async def count(self, user: str, collection: str) -> int:
        return await self._run(self._count, user, collection)

    def _count(self, user: str, collection: str) -> int:
        table = self._table(user, collection, create=False)
        return 0 if table is None else self._db.execute(
            "SELECT count(*) FROM chunks WHERE space = ?", (table,)).fetchone()[0]

    async def close(self) -> None:
        async with self._lock:
            self._db.close()


def _quoted(term: str) -> str:
    """A word as an FTS5 string: FTS5 syntax in a question ("AND", "*") stays words."""
    return '"' + term.replace('"', '""') + '"'
