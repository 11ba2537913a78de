"""The process that owns the Qdrant Edge shards (see qdrant_edge.py for why a process):
``python -m trustgraph.storage.vectors.edge_shards serve <root> <index_after>``.

It reads requests from stdin and answers each on stdout before reading the next:
``(function name, args)`` → ``(ok, result or error message)``, each a pickle behind
a 4-byte length. One thread touches the shards, so nothing needs a lock. It exits
when stdin closes, so it never outlives its parent. One shard directory per space
under the root; up to ``MAX_OPEN`` stay open.

Indexing a big shard (HNSW) takes minutes and holds the GIL throughout, so it never
runs here: ``begin_build`` copies the shard aside and starts journaling the writes
that follow; a separate process optimizes the copy (``... edge_shards build <path>``); then
``finish_build`` replays the journal onto the copy and swaps it in. Until then queries
keep scanning the live shard — slower, never wrong. A crash mid-swap is repaired when
the root is next opened: a complete live shard always exists as ``<name>`` or
``<name>.old``.
"""
import os
import pickle
import shutil
import struct
import sys
from collections import OrderedDict
from pathlib import Path

from qdrant_edge import (
    CountRequest,
    Distance,
    EdgeConfig,
    EdgeShard,
    EdgeVectorParams,
    FieldCondition,
    Filter,
    MatchValue,
    PayloadSchemaType,
    Point,
    Query,
    QueryRequest,
    ScrollRequest,
    UpdateOperation,
)

from .spaces import dense

MAX_OPEN = 32

_root = Path(".")
_open: OrderedDict[str, EdgeShard] = OrderedDict()
_journals: dict[str, list[tuple[str, list]]] = {}  # space name -> writes since the copy
_built_at: dict[str, int] = {}  # space name -> points when its last build began
_index_after = 20000


def start(root: str, index_after: int) -> None:
    """Open the root, repairing any swap a crash interrupted."""
    global _root, _index_after
    _root, _index_after = Path(root), index_after
    _root.mkdir(parents=True, exist_ok=True)
    for old in _root.glob("*.old"):
        live = old.with_suffix("")
        if live.exists():
            shutil.rmtree(old)
        else:
            old.rename(live)
    for build in _root.glob("*.build"):
        shutil.rmtree(build)


def _shard(name: str, dimension: int | None = None) -> EdgeShard | None:
    """The open shard for a space; created when ``dimension`` is given."""
    if name in _open:
        _open.move_to_end(name)
        return _open[name]
    path = _root / name
    if path.exists():
        shard = EdgeShard.load(str(path))
    elif dimension is None:
        return None
    else:
        shard = EdgeShard.create(str(path), EdgeConfig(
            vectors=EdgeVectorParams(size=dimension, distance=Distance.Cosine)))
        shard.update(UpdateOperation.create_field_index("documents",
                                                        PayloadSchemaType.Keyword))
    _open[name] = shard
    while len(_open) > MAX_OPEN:
        _open.popitem(last=False)[1].close()
    return shard


def _apply(shard: EdgeShard, write: tuple[str, list]) -> None:
    kind, items = write
    if kind == "upsert":
        shard.update(UpdateOperation.upsert_points(
            [Point(id, vector, payload) for id, vector, payload in items]))
    else:
        shard.update(UpdateOperation.delete_points(items))


def _write(name: str, shard: EdgeShard, write: tuple[str, list]) -> None:
    _apply(shard, write)  # durable in the shard's WAL once this returns
    if name in _journals:
        _journals[name].append(write)


def upsert(name: str, points: list[tuple[str, list[float], dict]]) -> bool:
    """Returns whether the shard now has enough unindexed points to index."""
    shard = _shard(name, len(points[0][1]))  # Edge refuses a vector of another size
    assert shard is not None  # created, given the dimension
    _write(name, shard, ("upsert", points))
    total, indexed = indexing(name)
    # The second test stops rebuilding a shard whose segments Qdrant leaves plain.
    return min(total - indexed, total - _built_at.get(name, 0)) >= _index_after


def delete(name: str, ids: list[str]) -> None:
    if shard := _shard(name):
        _write(name, shard, ("delete", ids))


def payloads(name: str, ids: list[str]) -> dict[str, dict]:
    shard = _shard(name)
    records = shard.retrieve([*ids], with_payload=True, with_vector=False) if shard else []
    return {str(r.id): r.payload or {} for r in records}


def search(name: str, vector: list[float], limit: int) -> list[tuple[dict, float]]:
    if not (shard := _shard(name)):
        return []
    found = shard.query(QueryRequest(limit=limit, query=Query.Nearest(vector),
                                     with_payload=True))
    return [(p.payload or {}, p.score) for p in found]


def referencing(name: str, document: str) -> list[tuple[str, list[float], dict]]:
    if not (shard := _shard(name)):
        return []
    where = Filter(must=[FieldCondition("documents", match=MatchValue(document))])
    points: list[tuple[str, list[float], dict]] = []
    offset = None
    while True:
        page, offset = shard.scroll(ScrollRequest(
            offset=offset, limit=1000, filter=where, with_payload=True, with_vector=True))
        points += [(str(p.id), dense(p.vector), p.payload or {}) for p in page]
        if offset is None:
            return points


def page(name: str, after: str | None, limit: int, vectors: bool = False
         ) -> tuple[list[tuple[str, list[float], dict]], str | None]:
    """Up to ``limit`` points (their vectors only if ``vectors``) from ``after`` on, in
    id order, and where the next page starts (None: this was the last)."""
    if not (shard := _shard(name)):
        return [], None
    points, offset = shard.scroll(ScrollRequest(offset=after, limit=limit,
                                                with_payload=True, with_vector=vectors))
    return [(str(p.id), dense(p.vector) if vectors else [], p.payload or {})
            for p in points], \
        None if offset is None else str(offset)


def count(name: str) -> int:
    shard = _shard(name)
    return shard.count(CountRequest(exact=True)) if shard else 0


def count_matching(name: str, matches: list[dict]) -> list[int]:
    if not (shard := _shard(name)):
        return [0] * len(matches)
    return [shard.count(CountRequest(exact=True, filter=Filter(must=[
        FieldCondition(key, match=MatchValue(value)) for key, value in match.items()])))
        for match in matches]


def drop(name: str) -> None:
    if shard := _open.pop(name, None):
        shard.close()
    _built_at.pop(name, None)
    _journals.pop(name, None)  # a build in flight is discarded when it finishes
    shutil.rmtree(_root / name, ignore_errors=True)


def indexing(name: str) -> tuple[int, int]:
    """(points, indexed points) of a space."""
    shard = _shard(name)
    info = shard.info() if shard else None
    return (info.points_count, info.indexed_vectors_count) if info else (0, 0)


def begin_build(name: str) -> str | None:
    """Copy the shard aside for indexing; the path of the copy, or None."""
    if name in _journals or not (shard := _shard(name)):
        return None
    shard.flush()
    _built_at[name] = indexing(name)[0]
    build = _root / f"{name}.build"
    shutil.rmtree(build, ignore_errors=True)
    shutil.copytree(_root / name, build)
    _journals[name] = []
    return str(build)


def finish_build(name: str, built: bool) -> bool:
    """Swap the indexed copy in, with the writes made while it was built. Returns
    whether those writes were enough to index again."""
    journal = _journals.pop(name, None)
    build, live, old = (_root / f"{name}{suffix}" for suffix in (".build", "", ".old"))
    if journal is None or not built or not live.exists():
        shutil.rmtree(build, ignore_errors=True)  # failed, or dropped meanwhile
        return False
    shard = EdgeShard.load(str(build))
    for write in journal:
        _apply(shard, write)
    shard.flush()
    shard.close()
    if live_shard := _open.pop(name, None):
        live_shard.close()
    live.rename(old)
    build.rename(live)
    shutil.rmtree(old)
    added = sum(len(items) for kind, items in journal if kind == "upsert")
    return added >= _index_after


def close() -> None:
    while _open:
        _open.popitem()[1].close()


def build(path: str) -> None:
    """Index a copied shard, in a process of its own."""
    shard = EdgeShard.load(path)
    shard.optimize()
    shard.close()


REQUESTS = {f.__name__: f for f in (upsert, delete, payloads, search, referencing, page, count,
                                    count_matching, drop, indexing, begin_build,
                                    finish_build)}


def serve(root: str, index_after: int) -> None:
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints go to stderr, never into a reply
    requests = sys.stdin.buffer
    start(root, index_after)
    try:
        while len(header := requests.read(4)) == 4:
            name, args = pickle.loads(requests.read(struct.unpack(">I", header)[0]))
            try:
                reply = (True, REQUESTS[name](*args))
            except Exception as error:  # the caller's error, not this process's
                reply = (False, f"{type(error).__name__}: {error}")
            frame = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
            replies.write(struct.pack(">I", len(frame)) + frame)
            replies.flush()
    finally:
        close()


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    else:
        build(sys.argv[2])
