"""The community cache: communities per (user, collection), kept in SQLite under the
data dir (they survive restarts) and in memory for the collections in use.

Lazy: nothing is computed when documents are loaded. A query that wants communities
asks the triples store for the collection's graph version (one round trip); if the
cached communities were built at another version, they are rebuilt then, once: a
second query for the same collection waits for the same computation. Leiden runs in
a child process (``worker.py``), one computation at a time, so a 100k-triple
computation neither blocks this process's event loop nor holds its GIL while other
requests are answered.
"""
import asyncio
import json
import logging
import sqlite3
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from trustgraph.schema import CommunityCacheState

from .communities import Communities
from .graph import GraphSource
from .worker import detect_in_subprocess

log = logging.getLogger(__name__)

Scope = tuple[str, str]  # (user, collection)
IN_MEMORY = 8  # collections whose communities stay loaded

SCHEMA = """
CREATE TABLE IF NOT EXISTS communities (
    user TEXT NOT NULL, collection TEXT NOT NULL, version INTEGER NOT NULL,
    computed_at REAL NOT NULL, seconds REAL NOT NULL, levels INTEGER NOT NULL,
    communities INTEGER NOT NULL, entities INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (user, collection)) WITHOUT ROWID;
"""
SUMMARY = ("SELECT collection, version, computed_at, seconds, levels, communities, entities"
           " FROM communities WHERE user = ?")


class CommunityStore:
    """The durable part: one row per (user, collection), read and written on a
    thread of its own (sqlite3 blocks)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA)
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="communities")

    async def _run(self, work, *args):
        return await asyncio.get_running_loop().run_in_executor(self._thread, work, *args)

    async def load(self, scope: Scope) -> Communities | None:
        def load() -> Communities | None:
            row = self._db.execute("SELECT body, computed_at, seconds FROM communities "
                                   "WHERE user = ? AND collection = ?", scope).fetchone()
            if row is None:
                return None
            found = Communities.from_json(json.loads(row[0]))
            found.computed_at, found.seconds = row[1], row[2]
            return found
        return await self._run(load)

    async def save(self, scope: Scope, found: Communities, body: str) -> None:
        """``body``: ``found`` as JSON, as the worker wrote it (not encoded again)."""
        row = (*scope, found.version, found.computed_at, found.seconds, len(found.levels),
               len(found.sizes), len(found.nodes), body)
        await self._run(lambda: self._db.execute(
            "INSERT OR REPLACE INTO communities VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row))

    async def delete(self, scope: Scope) -> int:
        """Forgets the scope's communities; how many there were (0: none cached)."""
        def delete() -> int:
            row = self._db.execute("DELETE FROM communities WHERE user = ? AND "
                                   "collection = ? RETURNING communities", scope).fetchone()
            return row[0] if row else 0
        return await self._run(delete)

    async def summaries(self, user: str) -> list[tuple]:
        return await self._run(lambda: self._db.execute(SUMMARY, (user,)).fetchall())

    def close(self) -> None:
        self._thread.shutdown(wait=True)
        self._db.close()


# (graph version, the graph's pages as the store encoded them) → the communities and
# their JSON
Detect = Callable[[int, AsyncIterator[bytes]], Awaitable[tuple[Communities, str]]]


class CommunityCache:
    def __init__(self, store: CommunityStore, detect: Detect = detect_in_subprocess) -> None:
        self._store = store
        self._detect = detect
        # One computation at a time, whatever the collection: each takes a core.
        self._computing = asyncio.Semaphore(1)
        self._loaded: OrderedDict[Scope, Communities] = OrderedDict()
        self._locks: dict[Scope, asyncio.Lock] = {}
        self.hits = self.misses = 0

    async def get(self, scope: Scope, graph: GraphSource,
                  version: int | None = None) -> tuple[Communities, bool]:
        """The scope's communities at its current graph ``version`` (read here unless
        the caller already has it), computed if need be, and whether they were
        cached (a hit)."""
        if version is None:
            version = await graph.version(*scope)
        found = await self._cached(scope)
        if found is not None and found.version == version:
            self.hits += 1
            return found, True
        lock = self._locks.setdefault(scope, asyncio.Lock())
        async with lock:  # one computation per collection; later askers reuse it
            found = await self._cached(scope)
            if found is not None and found.version == version:
                self.hits += 1
                return found, True
            self.misses += 1
            return await self._compute(scope, graph, version), False

    async def _cached(self, scope: Scope) -> Communities | None:
        if scope not in self._loaded:
            found = await self._store.load(scope)
            if found is None:
                return None
            self._remember(scope, found)
        self._loaded.move_to_end(scope)
        return self._loaded[scope]

    def _remember(self, scope: Scope, found: Communities) -> None:
        self._loaded[scope] = found
        self._loaded.move_to_end(scope)
        while len(self._loaded) > IN_MEMORY:
            self._loaded.popitem(last=False)

    async def _compute(self, scope: Scope, graph: GraphSource, version: int) -> Communities:
        started = time.perf_counter()
        # Tagged with the version read before the graph: a write landing meanwhile
        # makes the next query rebuild rather than trust what may have missed it.
        async with self._computing:
            found, body = await self._detect(version, graph.pages(*scope))
        found.computed_at, found.seconds = time.time(), time.perf_counter() - started
        await self._store.save(scope, found, body)
        self._remember(scope, found)
        log.info("communities of %s/%s at version %d: %d entities, %d communities, %d "
                 "levels in %.2f s", *scope, version, len(found.nodes), len(found.sizes),
                 len(found.levels), found.seconds)
        return found

    async def delete(self, user: str, collection: str) -> dict[str, int]:
        """The collection's cached communities forgotten (its collection was deleted):
        how many there were. A computation under way for it still saves its result,
        tagged with a graph version the deletion moved past, so it is never served."""
        scope = (user, collection)
        self._loaded.pop(scope, None)
        return {"communities": await self._store.delete(scope)}

    def computing(self, scope: Scope) -> bool:
        lock = self._locks.get(scope)
        return lock is not None and lock.locked()

    async def states(self, user: str, collection: str | None, graph: GraphSource
                     ) -> list[CommunityCacheState]:
        """What is cached for the user (one collection, or all of theirs)."""
        rows = {row[0]: row for row in await self._store.summaries(user)}
        names = [collection] if collection else sorted(rows)
        states = []
        for name in names:
            current = await graph.version(user, name)
            state = CommunityCacheState(collection=name, graph_version=current,
                                        computing=self.computing((user, name)))
            if name in rows:
                _, version, at, seconds, levels, count, entities = rows[name]
                state = state.model_copy(update=dict(
                    cached_version=version, fresh=version == current, computed_at=at,
                    compute_seconds=round(seconds, 3), levels=levels, communities=count,
                    entities=entities))
            states.append(state)
        return states
