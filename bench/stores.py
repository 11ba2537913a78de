"""``python -m bench.stores``: retrieval latency of every store backend that runs here.

Triples: N-hop expansion (GraphRAG's bounded subgraph: 5 seed entities, 2 hops, 30
triples per entity, at most 50 entities / 150 triples; one round trip per hop) over a
random graph of 100k triples (20k entities, each labelled, 80k edges), on SQLite and
on the Neo4j backend against ArcadeDB's Bolt plugin.

The ``subgraph`` service's handler (the same expansion, then labels and provenance of
everything reached, and the response built and size-checked), without the bus.

Vectors: top-10 entity-vector search over 100k random 384-d vectors in Qdrant Edge,
before its HNSW index exists (full scan, as served while indexing runs aside) and
after; and the Qdrant server backend against qdrant-client's local mode at a smaller
size (a pure-Python emulation: far too slow for 100k, and not what serves production).
"""
import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from qdrant_client import AsyncQdrantClient

from bench.stats import median, ms, percentile
from tests.support.arcadedb import ArcadeDb
from trustgraph.base import Context
from trustgraph.pubsub.embedded import free_port
from trustgraph.schema import RDFS_LABEL, SubgraphRequest, Term, Triple
from trustgraph.storage.triples.neo4j import Neo4jTriplesStore
from trustgraph.storage.triples.service import subgraph_handler
from trustgraph.storage.triples.sqlite import SqliteTriplesStore
from trustgraph.storage.triples.store import TriplesStore, expand
from trustgraph.storage.vectors.qdrant_edge import EdgeBackend
from trustgraph.storage.vectors.qdrant_server import QdrantServerBackend
from trustgraph.storage.vectors.store import ENTITIES, EntityVector, Space, VectorStore

USER, COLLECTION = "bench", "default"


def graph(size: int, rng: random.Random) -> tuple[list[Triple], list[Term]]:
    entities = [Term.iri(f"urn:e{n}") for n in range(size // 5)]
    label, predicates = Term.iri(RDFS_LABEL), [Term.iri(f"urn:p{n}") for n in range(20)]
    triples = [Triple(s=e, p=label, o=Term.literal(f"entity {n}"))
               for n, e in enumerate(entities)]
    while len(triples) < size:
        triples.append(Triple(s=rng.choice(entities), p=rng.choice(predicates),
                              o=rng.choice(entities)))
    return triples, entities


async def timed(work, runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        await work()
        samples.append(time.perf_counter() - started)
    return samples


def row(backend: str, operation: str, size: str, samples: list[float], note: str = "") -> dict:
    return {"backend": backend, "operation": operation, "size": size, "note": note,
            "p50": median(samples), "p95": percentile(samples, 95), "n": len(samples)}


async def bench_triples(name: str, store: TriplesStore, size: int, queries: int) -> list[dict]:
    rng = random.Random(42)
    triples, entities = graph(size, rng)
    started = time.perf_counter()
    for start in range(0, len(triples), 2000):
        await store.add(USER, COLLECTION, triples[start:start + 2000], document="bench")
    load = time.perf_counter() - started
    print(f"{name}: loaded {size} triples in {load:.1f} s", file=sys.stderr, flush=True)
    assert await store.count(USER, COLLECTION) == len(set(triples))

    async def two_hops():
        subgraph = await expand(store, USER, COLLECTION, rng.sample(entities, 5), max_hops=2)
        await store.labels(USER, COLLECTION, subgraph.entities)

    await timed(two_hops, 10)  # warm-up
    rows = [row(name, "2-hop expansion + labels (5 seeds)", f"{size // 1000}k triples",
                await timed(two_hops, queries), f"load {size / load:,.0f} triples/s")]
    handler, ctx = subgraph_handler(store), Context(id="bench", flow="bench", clients=None)

    def subgraph():
        return handler(SubgraphRequest(user=USER, collection=COLLECTION,
                                       seeds=rng.sample(entities, 5)), ctx)
    await timed(subgraph, 10)
    rows.append(row(name, "subgraph service handler (5 seeds, 2 hops, labels + provenance)",
                    f"{size // 1000}k triples", await timed(subgraph, queries)))

    def neighbours():
        return store.neighbours(USER, COLLECTION, rng.sample(entities, 50))
    rows.append(row(name, "neighbours of 50 entities (1 round trip)",
                    f"{size // 1000}k triples", await timed(neighbours, queries)))
    return rows


async def bench_vectors(name: str, backend, size: int, dim: int, queries: int,
                        index: bool) -> list[dict]:
    store = VectorStore(backend)
    vectors = np.random.default_rng(7).standard_normal((size, dim), dtype=np.float32)
    started = time.perf_counter()
    for start in range(0, size, 1000):
        await store.upsert_entities(USER, COLLECTION, [
            EntityVector(Term.iri(f"urn:e{n}"), vectors[n].tolist(), f"entity {n}", "bench")
            for n in range(start, min(size, start + 1000))])
    load = time.perf_counter() - started
    print(f"{name}: upserted {size} vectors in {load:.1f} s", file=sys.stderr, flush=True)
    rng = np.random.default_rng(8)

    def search():
        return store.search_entities(USER, COLLECTION, rng.standard_normal(dim).tolist(), 10)
    await timed(search, 5)
    label = f"{size // 1000}k × {dim}-d"
    phase = "(full scan, not indexed)" if isinstance(backend, EdgeBackend) else ""
    rows = [row(name, f"top-10 entity search {phase}".strip(), label,
                await timed(search, queries), f"upsert {size / load:,.0f} vectors/s")]
    if index and isinstance(backend, EdgeBackend):
        started = time.perf_counter()
        await backend.wait_for_indexing()
        built = time.perf_counter() - started
        points, indexed = await backend.indexing(Space(ENTITIES, USER, COLLECTION))
        print(f"{name}: indexed {indexed}/{points} in {built:.0f} s (aside)",
              file=sys.stderr, flush=True)
        await timed(search, 5)
        rows.append(row(name, "top-10 entity search (HNSW)", label,
                        await timed(search, queries),
                        f"index built aside in {built:.0f} s after a 5 s pause in writes"))
    await store.close()
    return rows


def report(rows: list[dict]) -> str:
    lines = ["| backend | operation | size | p50 ms | p95 ms | runs | note |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['backend']} | {r['operation']} | {r['size']} | {ms(r['p50'])} | "
              f"{ms(r['p95'])} | {r['n']} | {r['note']} |" for r in rows]
    return "\n".join(lines)


async def run(args, work: Path, arcadedb: ArcadeDb | None) -> list[dict]:
    rows = []
    sqlite = await SqliteTriplesStore.open(work / "triples.sqlite")
    rows += await bench_triples("SQLite", sqlite, args.triples, args.queries)
    await sqlite.close()
    if arcadedb:
        neo4j = await Neo4jTriplesStore.open(arcadedb.uri, arcadedb.user, arcadedb.password,
                                             arcadedb.database)
        rows += await bench_triples("Neo4j driver → ArcadeDB Bolt", neo4j, args.triples,
                                    args.queries)
        await neo4j.close()
    rows += await bench_vectors("Qdrant Edge", EdgeBackend(work / "vectors"), args.vectors,
                                args.dim, args.queries, not args.no_index)
    warnings.filterwarnings("ignore", "Payload indexes have no effect")  # local mode
    local = QdrantServerBackend(AsyncQdrantClient(location=":memory:"))
    rows += await bench_vectors("qdrant-client local mode", local, args.local_vectors,
                                args.dim, min(args.queries, 50), False)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--triples", type=int, default=100_000)
    parser.add_argument("--vectors", type=int, default=100_000)
    parser.add_argument("--local-vectors", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--no-neo4j", action="store_true", help="skip ArcadeDB")
    parser.add_argument("--no-index", action="store_true",
                        help="skip waiting minutes for Edge's HNSW index")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tg-bench-stores-"))
    arcadedb = None
    try:
        if not args.no_neo4j:
            arcadedb = ArcadeDb(work / "arcadedb", free_port(), free_port()).start()
        rows = asyncio.run(run(args, work, arcadedb))
    finally:
        if arcadedb:
            arcadedb.stop()
        shutil.rmtree(work, ignore_errors=True)
    print("\nStore latency, 2-core machine (milliseconds)\n")
    print(report(rows))


if __name__ == "__main__":
    main()
