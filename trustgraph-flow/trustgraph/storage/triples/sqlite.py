"""The embedded triples store: one SQLite file (WAL) in the data dir.

Threads, not the event loop, run SQLite: ``sqlite3`` calls block, and a large write
or a hub-entity lookup would stall every other request in the process. One writer
thread owns the only write connection, because SQLite admits one writer at a time
(queuing writes in our own thread avoids "database is locked" retries); a small pool
of reader threads, each with its own connection, serves queries concurrently with
that writer, which WAL allows. sqlite3 releases the GIL while a statement runs.

Layout: ``scopes`` maps (user, collection) to a small integer that prefixes every
index, so each lookup is confined to one scope by the index itself. ``triples`` holds
each distinct triple once per scope; ``provenance`` lists the (document, chunk) pairs
supporting it. Lists of values go in as one JSON parameter (``json_each``), so a
batched lookup is one statement whatever its size. All values are bound parameters.
"""
import asyncio
import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Self, TypeVar

from trustgraph.schema import RDFS_LABEL, Term, Triple
from trustgraph.sqlite_transaction import transaction

from .store import EdgePage, ProvenanceRow, check_addable, iris, make_triple

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS scopes (
    id INTEGER PRIMARY KEY, user TEXT NOT NULL, collection TEXT NOT NULL,
    UNIQUE (user, collection));
CREATE TABLE IF NOT EXISTS triples (
    id INTEGER PRIMARY KEY, scope INTEGER NOT NULL,
    s TEXT NOT NULL, p TEXT NOT NULL, o TEXT NOT NULL, o_iri INTEGER NOT NULL,
    UNIQUE (scope, s, p, o, o_iri));
CREATE INDEX IF NOT EXISTS triples_by_p ON triples (scope, p, o);
CREATE INDEX IF NOT EXISTS triples_by_o ON triples (scope, o, o_iri);
CREATE TABLE IF NOT EXISTS provenance (
    triple INTEGER NOT NULL, document TEXT NOT NULL, chunk TEXT NOT NULL,
    PRIMARY KEY (triple, document, chunk)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS provenance_by_document ON provenance (document);
CREATE INDEX IF NOT EXISTS provenance_by_chunk ON provenance (chunk);
CREATE TABLE IF NOT EXISTS versions (
    user TEXT NOT NULL, collection TEXT NOT NULL, version INTEGER NOT NULL,
    PRIMARY KEY (user, collection)) WITHOUT ROWID;
"""

# Kept apart from ``scopes``, whose row goes with the collection: a deleted and
# re-filled collection must never return to a version a reader has cached.
BUMP_VERSION = """
INSERT INTO versions (user, collection, version) VALUES (?, ?, 1)
ON CONFLICT (user, collection) DO UPDATE SET version = version + 1
"""


SCOPE = "(SELECT id FROM scopes WHERE user = ? AND collection = ?)"
MMAP_BYTES = 1 << 30  # address space, not memory: the pages are the OS page cache's

# Keyset pages over the scope's triples between two IRIs and its label triples, in
# id order: a page's labels come from the same range scan, with no lookup per IRI
# (an IRI's label may arrive on another page than its edges; the reader joins them).
# NOT INDEXED keeps SQLite on the id range: through the scope's index it would sort
# the whole scope for every page. The page is summed (a pair's triples) and written
# as JSON by SQLite itself, in C and without the GIL, so the process serving
# GraphRAG's subgraph requests beside it builds no Python object per edge;
# MATERIALIZED reads the range once for the four results. An IRI's label is its
# least, as ``labels`` gives.
EDGES = f"""
WITH page(id, s, o, o_iri) AS MATERIALIZED (
    SELECT id, s, o, o_iri FROM triples NOT INDEXED
    WHERE id > ? AND scope = {SCOPE} AND ((o_iri = 1 AND s <> o) OR (p = ? AND o_iri = 0))
    ORDER BY id LIMIT ?)
SELECT (SELECT count(*) FROM page), (SELECT max(id) FROM page),
       CAST((SELECT json_group_array(json_array(s, o, weight)) FROM (
                SELECT s, o, count(*) AS weight FROM page WHERE o_iri = 1 GROUP BY s, o))
            AS BLOB),
       CAST((SELECT json_group_object(s, label) FROM (
                SELECT s, min(o) AS label FROM page WHERE o_iri = 0 GROUP BY s))
            AS BLOB)
"""

NEIGHBOURS = f"""
WITH scope(id) AS {SCOPE},
     seeds(e) AS (SELECT DISTINCT value FROM json_each(?)),
     hits(e, id) AS (
        SELECT seeds.e, t.id FROM seeds JOIN triples t
            ON t.scope = (SELECT id FROM scope) AND t.s = seeds.e
        UNION
        SELECT seeds.e, t.id FROM seeds JOIN triples t
            ON t.scope = (SELECT id FROM scope) AND t.o = seeds.e AND t.o_iri = 1),
     ranked(id, n) AS (
        SELECT id, row_number() OVER (PARTITION BY e ORDER BY id) FROM hits)
SELECT s, p, o, o_iri FROM triples
WHERE id IN (SELECT id FROM ranked WHERE n <= ?) ORDER BY id LIMIT ?
"""

LABELS = f"""
SELECT s, min(o) FROM triples
WHERE scope = {SCOPE} AND p = ? AND o_iri = 0 AND s IN (SELECT value FROM json_each(?))
GROUP BY s
"""

# ``wanted`` rows are [index into the caller's list, s, p, o, o_iri]; the unique index
# on (scope, s, p, o, o_iri) finds each, and its least (document, chunk) is kept.
PROVENANCE = f"""
WITH wanted(n, s, p, o, o_iri) AS (
        SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'),
               json_extract(value, '$[2]'), json_extract(value, '$[3]'),
               json_extract(value, '$[4]')
        FROM json_each(?)),
     ranked(n, document, chunk, rank) AS (
        SELECT w.n, pr.document, pr.chunk,
               row_number() OVER (PARTITION BY w.n ORDER BY
                   pr.chunk IN (SELECT value FROM json_each(?)) DESC, pr.document, pr.chunk)
        FROM wanted w
        JOIN triples t ON t.scope = {SCOPE} AND t.s = w.s AND t.p = w.p AND t.o = w.o
                      AND t.o_iri = w.o_iri
        JOIN provenance pr ON pr.triple = t.id)
SELECT n, document, chunk FROM ranked WHERE rank = 1
"""

# Through the provenance index, chunk by chunk. (Joining triples once per end under
# a UNION let SQLite plan the object side as a scan of the scope's whole object
# index: 400 ms at 100k triples against ~1 ms.)
CHUNK_TRIPLES = f"""
SELECT DISTINCT pr.chunk, t.s, t.p, t.o, t.o_iri
FROM (SELECT DISTINCT value AS chunk FROM json_each(?)) AS wanted
JOIN provenance pr ON pr.chunk = wanted.chunk
JOIN triples t ON t.id = pr.triple AND t.scope = {SCOPE}
ORDER BY pr.chunk, t.s, t.p, t.o, t.o_iri DESC
"""

# Keyset pages in the order of the provenance key; NOT INDEXED keeps SQLite on the id
# range (through the scope's index it would sort the whole scope for every page).
PROVENANCE_PAGE = f"""
SELECT t.id, pr.document, pr.chunk, t.s, t.p, t.o, t.o_iri
FROM triples t NOT INDEXED JOIN provenance pr ON pr.triple = t.id
WHERE t.id >= ? AND t.scope = {SCOPE} AND (t.id > ? OR (pr.document, pr.chunk) > (?, ?))
ORDER BY t.id, pr.document, pr.chunk LIMIT ?
"""

ADD_TRIPLE = """
INSERT INTO triples (scope, s, p, o, o_iri) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
"""

ADD_PROVENANCE = """
INSERT OR IGNORE INTO provenance (triple, document, chunk)
SELECT id, ?, ? FROM triples WHERE scope = ? AND s = ? AND p = ? AND o = ? AND o_iri = ?
"""


class SqliteTriplesStore:
    def __init__(self, path: str | Path, readers: int = 2):
        self._path = str(path)
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="triples-write")
        self._readers = ThreadPoolExecutor(readers, thread_name_prefix="triples-read")
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []

    @classmethod
    async def open(cls, path: str | Path, readers: int = 2) -> Self:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        store = cls(path, readers)
        await asyncio.get_running_loop().run_in_executor(
            store._writer, lambda: store._connection().executescript(SCHEMA))
        return store

    async def close(self) -> None:
        for pool in (self._writer, self._readers):
            await asyncio.to_thread(pool.shutdown)
        for connection in self._connections:
            connection.close()

    # -- threads -----------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection (autocommit; writes open their own transaction)."""
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(self._path, isolation_level=None,
                                         check_same_thread=False)
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")  # durable across a crash
            connection.execute("PRAGMA busy_timeout=10000")
            # Reads map the file rather than copy its pages into each connection's
            # small page cache: a subgraph request reads scattered pages, and at 100k
            # triples this cut its time by a fifth (lazy-rag's two-hop expansion).
            connection.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
            self._local.connection = connection
            self._connections.append(connection)
        return connection

    async def _read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, lambda: work(self._connection()))

    async def _write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        def written() -> T:
            with transaction(self._connection(), write=True) as db:
                return work(db)
        return await asyncio.get_running_loop().run_in_executor(self._writer, written)

    # -- writes ------------------------------------------------------------------

    async def add(self, user: str, collection: str, triples: Iterable[Triple], *,
                  document: str, chunk: str = "") -> None:
        triples = list(triples)
        for triple in triples:
            check_addable(triple)
        if triples:
            await self._write(lambda db: _add(db, user, collection, [
                (t.s.value, t.p.value, t.o.value, t.o.is_iri, document, chunk) for t in triples]))

    async def add_provenance(self, user: str, collection: str,
                             rows: Sequence[ProvenanceRow]) -> None:
        if rows:
            await self._write(lambda db: _add(db, user, collection, rows))

    async def remove_document(self, user: str, collection: str, document: str) -> None:
        def remove(db: sqlite3.Connection) -> None:
            ids = json.dumps([row[0] for row in db.execute(
                "SELECT p.triple FROM provenance p JOIN triples t ON t.id = p.triple"
                f" WHERE p.document = ? AND t.scope = {SCOPE}",
                (document, user, collection))])
            db.execute("DELETE FROM provenance WHERE document = ?"
                       " AND triple IN (SELECT value FROM json_each(?))", (document, ids))
            dropped = db.execute(
                "DELETE FROM triples WHERE id IN (SELECT value FROM json_each(?))"
                " AND NOT EXISTS (SELECT 1 FROM provenance WHERE triple = triples.id)",
                (ids,)).rowcount
            if dropped:
                db.execute(BUMP_VERSION, (user, collection))
        await self._write(remove)

    async def delete_collection(self, user: str, collection: str) -> int:
        def delete(db: sqlite3.Connection) -> int:
            row = db.execute("SELECT id FROM scopes WHERE user = ? AND collection = ?",
                             (user, collection)).fetchone()
            if row is None:
                return 0
            db.execute("DELETE FROM provenance WHERE triple IN"
                       " (SELECT id FROM triples WHERE scope = ?)", row)
            removed = db.execute("DELETE FROM triples WHERE scope = ?", row).rowcount
            db.execute("DELETE FROM scopes WHERE id = ?", row)
            db.execute(BUMP_VERSION, (user, collection))
            return removed
        return await self._write(delete)

    # -- reads -------------------------------------------------------------------

    async def query(self, user: str, collection: str, s: Term | None = None,
                    p: Term | None = None, o: Term | None = None,
                    limit: int = 10000) -> list[Triple]:
        if (s and not s.is_iri) or (p and not p.is_iri):
            return []  # never stored
        # The statement is assembled from the fixed fragments below only; every
        # value is a bound parameter.
        where, params = [f"scope = {SCOPE}"], list[str | int]([user, collection])
        if s:
            where.append("s = ?")
            params.append(s.value)
        if p:
            where.append("p = ?")
            params.append(p.value)
        if o:
            where.append("o = ? AND o_iri = ?")
            params += [o.value, int(o.is_iri)]
        sql = f"SELECT s, p, o, o_iri FROM triples WHERE {' AND '.join(where)} LIMIT ?"
        return await self._read(lambda db: [
            make_triple(*row) for row in db.execute(sql, (*params, limit))])

    async def neighbours(self, user: str, collection: str, entities: Iterable[Term],
                         limit_per_entity: int = 30, limit: int | None = None
                         ) -> list[Triple]:
        keys = json.dumps(iris(entities))
        return await self._read(lambda db: [make_triple(*row) for row in db.execute(
            NEIGHBOURS, (user, collection, keys, limit_per_entity,
                         -1 if limit is None else limit))])

    async def labels(self, user: str, collection: str,
                     entities: Iterable[Term]) -> dict[Term, str]:
        keys = json.dumps(iris(entities))
        rows = await self._read(lambda db: db.execute(
            LABELS, (user, collection, RDFS_LABEL, keys)).fetchall())
        return {Term.iri(entity): label for entity, label in rows}

    async def provenance(self, user: str, collection: str, triples: Iterable[Triple],
                         prefer: Sequence[str] = ()) -> dict[Triple, tuple[str, str]]:
        triples = [t for t in triples if t.s.is_iri and t.p.is_iri]  # others never stored
        rows = json.dumps([[n, t.s.i, t.p.i, t.o.value, int(t.o.is_iri)]
                           for n, t in enumerate(triples)])
        found = await self._read(lambda db: db.execute(
            PROVENANCE, (rows, json.dumps(list(prefer)), user, collection)).fetchall())
        return {triples[n]: (document, chunk) for n, document, chunk in found}

    async def chunk_triples(self, user: str, collection: str,
                            chunks: Iterable[str]) -> dict[str, list[Triple]]:
        keys = json.dumps(list(dict.fromkeys(chunks)))
        rows = await self._read(lambda db: db.execute(
            CHUNK_TRIPLES, (keys, user, collection)).fetchall())
        found: dict[str, list[Triple]] = {}
        for chunk, *triple in rows:
            found.setdefault(chunk, []).append(make_triple(*triple))
        return found

    async def count(self, user: str, collection: str) -> int:
        return await self._read(lambda db: db.execute(
            f"SELECT count(*) FROM triples WHERE scope = {SCOPE}",
            (user, collection)).fetchone()[0])

    async def provenance_count(self, user: str, collection: str) -> int:
        return await self._read(lambda db: db.execute(
            "SELECT count(*) FROM provenance pr JOIN triples t ON t.id = pr.triple"
            f" WHERE t.scope = {SCOPE}", (user, collection)).fetchone()[0])

    async def version(self, user: str, collection: str) -> int:
        row = await self._read(lambda db: db.execute(
            "SELECT version FROM versions WHERE user = ? AND collection = ?",
            (user, collection)).fetchone())
        return row[0] if row else 0

    async def provenance_page(self, user: str, collection: str, after: str = "",
                              limit: int = 1000) -> tuple[list[ProvenanceRow], str | None]:
        id, document, chunk = _cursor(after)
        found = await self._read(lambda db: db.execute(
            PROVENANCE_PAGE, (id, user, collection, id, document, chunk, limit)).fetchall())
        rows = [(s, p, o, bool(o_iri), document, chunk)
                for _, document, chunk, s, p, o, o_iri in found]
        last = json.dumps(found[-1][:3]) if len(found) == limit else None
        return rows, last

    async def edges(self, user: str, collection: str, after: int = 0,
                    limit: int = 10000) -> EdgePage:
        def page(db: sqlite3.Connection) -> EdgePage:
            rows, last, edges, labels = db.execute(
                EDGES, (after, user, collection, RDFS_LABEL, limit)).fetchone()
            return EdgePage(edges, labels, last if rows == limit else None)
        return await self._read(page)


def _cursor(after: str) -> tuple[int, str, str]:
    """The key of the last row of the page before: "" or a ``next`` this store gave."""
    if not after:
        return 0, "", ""
    try:
        id, document, chunk = json.loads(after)
    except (ValueError, TypeError):
        raise ValueError(f"after: {after[:100]!r} is not the next of a page") from None
    if not (isinstance(id, int) and isinstance(document, str) and isinstance(chunk, str)):
        raise ValueError(f"after: {after[:100]!r} is not the next of a page")
    return id, document, chunk


def _add(db: sqlite3.Connection, user: str, collection: str,
         rows: Sequence[ProvenanceRow]) -> None:
    """Triples with their provenance, in the caller's write transaction."""
    db.execute("INSERT OR IGNORE INTO scopes (user, collection) VALUES (?, ?)",
               (user, collection))
    scope = db.execute("SELECT id FROM scopes WHERE user = ? AND collection = ?",
                       (user, collection)).fetchone()[0]
    before = db.total_changes
    db.executemany(ADD_TRIPLE, [(scope, s, p, o, int(o_iri)) for s, p, o, o_iri, _, _ in rows])
    if db.total_changes != before:  # a triple new to the scope
        db.execute(BUMP_VERSION, (user, collection))
    db.executemany(ADD_PROVENANCE, [(document, chunk, scope, s, p, o, int(o_iri))
                                    for s, p, o, o_iri, document, chunk in rows])
