"""Qdrant Edge only: indexing aside while writes go on, building a left-over index at
the first search, its worker's replies, restarts and crash repair."""
import asyncio
import logging

from tests.support.vector_points import vec
from trustgraph.storage.vectors import edge_shards
from trustgraph.storage.vectors.qdrant_edge import EdgeBackend
from trustgraph.storage.vectors.store import Point, Space


async def test_edge_indexes_aside_and_keeps_the_writes_made_meanwhile(shard_dir, caplog):
    caplog.set_level(logging.INFO, "trustgraph.storage.vectors.qdrant_edge")
    tmp_path = shard_dir
    backend = EdgeBackend(tmp_path, index_after=300, quiet=0)
    space = Space("chunks", "u", "c")

    def point(n: int) -> Point:
        return Point(f"00000000-0000-0000-0000-{n:012d}", vec(n), {"n": n})

    try:
        await backend.upsert(space, [point(n) for n in range(400)])
        assert backend._builds, "a build should have started"
        await asyncio.sleep(0.05)  # the copy is made; the builder process starts
        await backend.upsert(space, [point(n) for n in range(400, 450)])
        await backend.delete(space, [point(n).id for n in range(10)])
        assert await backend.count(space) == 440  # served while the build runs
        await backend.wait_for_indexing()
        assert "swapped in" in caplog.text
        assert await backend.count(space) == 440
        [(payload, score)] = await backend.search(space, vec(420), 1)
        assert payload == {"n": 420}
        assert (await backend.search(space, vec(3), 1))[0][0] != {"n": 3}
        assert not list(tmp_path.glob("*.build")) and not list(tmp_path.glob("*.old"))
    finally:
        await backend.close()
    reopened = EdgeBackend(tmp_path)
    try:
        assert await reopened.count(space) == 440
    finally:
        await reopened.close()


async def test_edge_builds_at_first_search_the_index_a_restart_left_unbuilt(shard_dir,
                                                                           caplog):
    """Written, then closed before writes paused long enough to index (a restart
    right after a big import): the next process's first search starts the build."""
    caplog.set_level(logging.INFO, "trustgraph.storage.vectors.qdrant_edge")
    space = Space("chunks", "u", "c")
    writer = EdgeBackend(shard_dir, index_after=300, quiet=3600)
    try:
        await writer.upsert(space, [Point(f"00000000-0000-0000-0000-{n:012d}", vec(n),
                                          {"n": n}) for n in range(400)])
    finally:
        await writer.close()
    assert "swapped in" not in caplog.text
    reader = EdgeBackend(shard_dir, index_after=300, quiet=0)
    try:
        [(payload, _)] = await reader.search(space, vec(7), 1)
        assert payload == {"n": 7}
        assert reader._builds, "the first search should start the missed build"
        await reader.wait_for_indexing()
        assert "swapped in" in caplog.text
        assert await reader.count(space) == 400
    finally:
        await reader.close()


async def test_edge_cancelled_call_does_not_leave_its_reply_to_the_next(shard_dir):
    backend = EdgeBackend(shard_dir)
    space = Space("chunks", "u", "c")
    try:
        await backend.upsert(space, [Point(f"00000000-0000-0000-0000-{n:012d}", vec(n), {})
                                     for n in range(3)])
        for _ in range(5):
            search = asyncio.create_task(backend.search(space, vec(1), 3))
            await asyncio.sleep(0)  # sent, not yet answered
            search.cancel()
            assert await backend.count(space) == 3
    finally:
        await backend.close()


async def test_edge_worker_restarts_after_it_dies(shard_dir):
    backend = EdgeBackend(shard_dir)
    space = Space("chunks", "u", "c")
    try:
        await backend.upsert(space, [Point("00000000-0000-0000-0000-000000000001", vec(1), {})])
        backend._worker.kill()
        await backend._worker.wait()
        assert await backend.count(space) == 1  # a new worker, same shards
    finally:
        await backend.close()


def test_edge_repairs_a_swap_interrupted_by_a_crash(tmp_path):
    for name in ("restored.old", "complete", "complete.old", "partial.build"):
        (tmp_path / name).mkdir()
    edge_shards.start(str(tmp_path), 20000)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["complete", "restored"]
