"""Qdrant Edge, the embedded vector backend: the Qdrant engine in-process, on disk in
the data dir, one shard per space.

Why a child process and not a thread: ``qdrant-edge-py`` holds the GIL for the whole
of every call (measured: another thread gets no time slice during a 20 ms full-scan
query at 100k points, nor during the minutes an HNSW build takes). In a thread it
would stall the event loop just the same. So one worker process owns the shards —
Edge allows one owner per shard anyway — and serves every call, in order
(edge_shards.py), over its stdin/stdout; this side only awaits the replies. A plain
subprocess rather than ``multiprocessing``: spawn re-imports the parent's main module,
which breaks programs that do not guard it. Shards big enough to need an index are
indexed aside by a third, low-priority process once writes to them pause.
"""
import asyncio
import logging
import os
import pickle
import struct
import sys
import time
from pathlib import Path

from trustgraph.base import LaneLock

from . import edge_shards
from .store import Point, Space

log = logging.getLogger(__name__)


class EdgeError(RuntimeError):
    """Raised for a request the shard process refused or could not answer."""


def _lower_priority() -> None:
    os.nice(10)


class EdgeBackend:
    def __init__(self, root: str | Path, index_after: int = 20000, quiet: float = 5.0):
        """``index_after``: unindexed points that make a shard worth indexing (below
        ~20k a full scan is as fast as HNSW); ``quiet``: seconds without writes to a
        shard before indexing starts."""
        self._root, self._index_after, self._quiet = Path(root), index_after, quiet
        self._worker: asyncio.subprocess.Process | None = None
        # One request in flight (replies come in order); a question's waits only for
        # the call under way, not for a load's queue of writes (base/lanes.py).
        self._calling = LaneLock()
        self._last_write: dict[str, float] = {}
        self._builds: dict[str, asyncio.Task] = {}
        self._looked_at: set[str] = set()  # spaces checked for a missing index

    async def _call(self, function, *args):
        request = pickle.dumps((function.__name__, args), protocol=pickle.HIGHEST_PROTOCOL)
        # Shielded: a caller cancelled mid-exchange must not leave its reply in the
        # pipe for the next caller to read. The exchange completes regardless.
        ok, result = pickle.loads(await asyncio.shield(self._exchange(request)))
        if not ok:
            raise EdgeError(result)
        return result

    async def _exchange(self, request: bytes) -> bytes:
        async with self._calling:
            if self._worker is None or self._worker.returncode is not None:
                self._worker = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", edge_shards.__name__, "serve", str(self._root),
                    str(self._index_after),
                    stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
            stdin, stdout = self._worker.stdin, self._worker.stdout
            assert stdin is not None and stdout is not None  # both PIPE
            try:
                stdin.write(struct.pack(">I", len(request)) + request)
                await stdin.drain()
                header = await stdout.readexactly(4)
                return await stdout.readexactly(struct.unpack(">I", header)[0])
            except (ConnectionError, asyncio.IncompleteReadError) as error:
                raise EdgeError("the vector shard process exited; it restarts on the "
                                "next request") from error

    async def upsert(self, space: Space, points: list[Point]) -> None:
        if not points:
            return
        rows = [(p.id, p.vector, p.payload) for p in points]
        if await self._call(edge_shards.upsert, space.name, rows):
            self._last_write[space.name] = time.monotonic()
            self._build(space.name)

    async def payloads(self, space: Space, ids: list[str]) -> dict[str, dict]:
        return await self._call(edge_shards.payloads, space.name, ids) if ids else {}

    async def search(self, space: Space, vector: list[float],
                     limit: int) -> list[tuple[dict, float]]:
        if space.name not in self._looked_at and space.name not in self._last_write:
            await self._index_if_never_indexed(space.name)
        return await self._call(edge_shards.search, space.name, vector, limit)

    async def referencing(self, space: Space, document: str) -> list[Point]:
        rows = await self._call(edge_shards.referencing, space.name, document)
        return [Point(*row) for row in rows]

    async def page(self, space: Space, after: str | None, limit: int,
                   vectors: bool = False) -> tuple[list[Point], str | None]:
        rows, following = await self._call(edge_shards.page, space.name, after, limit,
                                           vectors)
        return [Point(*row) for row in rows], following

    async def delete(self, space: Space, ids: list[str]) -> None:
        await self._call(edge_shards.delete, space.name, ids)

    async def drop(self, space: Space) -> None:
        await self._call(edge_shards.drop, space.name)

    async def count(self, space: Space) -> int:
        return await self._call(edge_shards.count, space.name)

    async def count_matching(self, space: Space,
                             matches: list[dict[str, str | int]]) -> list[int]:
        return await self._call(edge_shards.count_matching, space.name, matches)

    async def indexing(self, space: Space) -> tuple[int, int]:
        """(points, indexed points)."""
        return await self._call(edge_shards.indexing, space.name)

    async def wait_for_indexing(self) -> None:
        while self._builds:
            await asyncio.gather(*self._builds.values(), return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._builds.values()):
            task.cancel()
        await asyncio.gather(*self._builds.values(), return_exceptions=True)
        async with self._calling:
            if self._worker and self._worker.returncode is None and self._worker.stdin:
                self._worker.stdin.close()  # the worker closes its shards and exits
                await self._worker.wait()

    # -- indexing aside ------------------------------------------------------------

    def _build(self, name: str) -> None:
        if name not in self._builds:
            task = asyncio.create_task(self._index(name))
            task.add_done_callback(lambda _: self._builds.pop(name, None))
            self._builds[name] = task

    async def _index_if_never_indexed(self, name: str) -> None:
        """A shard written and closed before its first index was built (a restart
        right after a big import, or a core imported while stopping) would be
        scanned whole by every query until its next write: its first search in this
        process (when this process has not written to it) starts the build it
        missed. (A shard whose build left no segment indexed is built again, once
        per process start.)"""
        self._looked_at.add(name)
        total, indexed = await self._call(edge_shards.indexing, name)
        if indexed == 0 and total >= self._index_after:
            self._last_write.setdefault(name, time.monotonic() - self._quiet)
            self._build(name)

    async def _index(self, name: str) -> None:
        """Index the shard once writes pause; again if enough arrived meanwhile."""
        again = True
        while again:
            while (wait := self._last_write[name] + self._quiet - time.monotonic()) > 0:
                await asyncio.sleep(wait)
            path = await self._call(edge_shards.begin_build, name)
            if path is None:
                return
            started, built, process = time.monotonic(), False, None
            try:
                process = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", edge_shards.__name__, "build", path,
                    stdin=asyncio.subprocess.DEVNULL, preexec_fn=_lower_priority)
                built = await process.wait() == 0
            finally:
                if process and process.returncode is None:
                    process.kill()
                    await process.wait()
                again = await asyncio.shield(
                    self._call(edge_shards.finish_build, name, built)) and built
            log.info("indexed vector shard %s in %.1f s (%s)", name,
                     time.monotonic() - started, "swapped in" if built else "failed")
