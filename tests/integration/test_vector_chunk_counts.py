"""``VectorStore.stored_chunks`` (what ``chunk-count`` and ``load-status`` report) on
every vector backend of the contract suite: chunk vectors are counted per document
*and version*, never across scopes."""
from tests.integration.test_vectors_contract import (scope, shard_dir, store,  # noqa: F401
                                                     vec)
from trustgraph.storage.vectors.store import ChunkVector


def chunks(document: str, count: int, version: int) -> list[ChunkVector]:
    return [ChunkVector(chunk_id=f"{document}/c{n}", document=document,
                        vector=vec(f"{document}{n}{version}"), text=f"text {n}",
                        version=version) for n in range(count)]


async def test_chunks_are_counted_per_document_and_version(store, scope):
    user, collection = scope
    assert await store.stored_chunks(user, collection, [("a", 1)]) == [0]  # no space yet
    await store.upsert_chunks(user, collection, chunks("a", 3, 1) + chunks("b", 2, 1))
    assert await store.stored_chunks(user, collection, [("a", 1), ("b", 1), ("a", 2)]) == [
        3, 2, 0]
    # A re-load (version 2) overwrites the chunks it has: only those count for it.
    await store.upsert_chunks(user, collection, chunks("a", 2, 2))
    assert await store.stored_chunks(user, collection, [("a", 2), ("a", 1)]) == [2, 1]
    assert await store.stored_chunks(user, "elsewhere", [("a", 2)]) == [0]
    assert await store.stored_chunks("someone-else", collection, [("a", 2)]) == [0]
    assert await store.stored_chunks(user, collection, []) == []


def indexed(document: str, count: int, version: int) -> list[ChunkVector]:
    return [ChunkVector(chunk_id=f"{document}/c{n}", document=document,
                        vector=vec(f"{document}{n}{version}"), text=f"v{version} {n}",
                        version=version, index=n) for n in range(count)]


async def test_a_shorter_version_drops_only_the_tail_an_older_version_left(store, scope):
    user, collection = scope
    await store.upsert_chunks(user, collection, indexed("a", 5, 1) + indexed("b", 5, 1))
    await store.upsert_chunks(user, collection, indexed("a", 1, 2))  # v2's first chunk
    assert await store.remove_stale_chunks(user, collection, "a", 2, total=2) == 3
    # a/c1 (v1) stays until v2's own c1 replaces it; b is another document.
    assert await store.stored_chunks(user, collection, [("a", 2), ("a", 1), ("b", 1)]) == [
        1, 1, 5]
    assert await store.remove_stale_chunks(user, collection, "a", 2, total=2) == 0
    # A version never drops a newer version's chunks.
    await store.upsert_chunks(user, collection, indexed("b", 5, 3))
    assert await store.remove_stale_chunks(user, collection, "b", 2, total=1) == 0
