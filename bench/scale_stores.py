"""``bench.scale``'s stores-only size (1M chunks, 1M triples), and what it shares with the
full-stack sizes: resident memory of processes, disk per store.

The stores are the embedded ones ``tg-start`` opens (Qdrant Edge with the FTS5 lexical
index, SQLite triples, the librarian's SQLite), in this process. The core is imported
with the gateway's own import code (``trustgraph.gateway.apis.cores.CoreImport``) calling
the store owners' core services directly instead of over the bus. Then each query,
``--rounds`` times: the 10 chunks nearest a random vector, the 10 entities nearest
one, a lexical search, and GraphRAG's subgraph (5 seeds, 2 hops, the default budgets);
before Edge's index exists (every query scans the whole shard) and after it is built.
"""
import asyncio
import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.scale_core import DIMENSION, question_words
from bench.stats import median, ms, percentile
from trustgraph.base import Context
from trustgraph.extract.vocabulary import entity_iri
from trustgraph.gateway.apis.cores import SERVICE_OF, CoreImport, Scope
from trustgraph.gateway.core.caller import OPEN
from trustgraph.librarian.core import core_documents_handler
from trustgraph.librarian.store import LibraryStore
from trustgraph.schema import SubgraphRequest, Term
from trustgraph.schema.core_archive import CoreReader
from trustgraph.storage.settings import StoreSettings
from trustgraph.storage.triples.configured import open_triples_store
from trustgraph.storage.triples.core import core_triples_handler
from trustgraph.storage.triples.service import subgraph_handler
from trustgraph.storage.vectors.configured import open_vector_store
from trustgraph.storage.vectors.core import core_vectors_handler

USER, COLLECTION = "bench", "default"
CONTEXT = Context(id="bench", flow="default", clients=None)


# --- processes and files -------------------------------------------------------------

def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def command(pid: int) -> str:
    """A child's module (``python -m x.y.z``) or program name, for a report."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return str(pid)
    if b"-m" in argv:
        return argv[argv.index(b"-m") + 1].decode().rsplit(".", 1)[-1]
    return Path(argv[0].decode()).name


def disk(data_dir: Path) -> dict[str, float]:
    """MB on disk of each store in a data dir (what ``du`` counts)."""
    found = {}
    for entry in sorted(Path(data_dir).iterdir()):
        files = [entry] if entry.is_file() else [p for p in entry.rglob("*") if p.is_file()]
        found[entry.name] = sum(p.stat().st_blocks * 512 for p in files) / 1e6
    return {name: mb for name, mb in found.items() if mb >= 0.05}


# --- the stores alone ------------------------------------------------------------------

class Direct:
    """What ``CoreImport`` calls, served by the handlers in this process; each part's
    seconds from its first request to its last answer."""

    def __init__(self, handlers: dict) -> None:
        self.handlers = handlers
        self.spans: dict[str, tuple[float, float]] = {}

    async def call(self, scope: Scope, request) -> dict:
        started = time.perf_counter()
        response = await self.handlers[SERVICE_OF[request.part]](request, CONTEXT)
        first = self.spans.get(request.part, (started, 0.0))[0]
        self.spans[request.part] = (first, time.perf_counter())
        return json.loads(response.model_dump_json(exclude_none=True))

    @property
    def seconds(self) -> dict[str, float]:
        return {part: end - start for part, (start, end) in self.spans.items()}


async def import_directly(core: Path, handlers: dict) -> dict[str, float]:
    direct = Direct(handlers)
    importer = CoreImport(direct, Scope(OPEN, USER, COLLECTION, "default"))
    reader = CoreReader()
    try:
        with open(core, "rb") as file:
            while data := file.read(1 << 20):
                for name, member in reader.feed(data):
                    await importer.member(name, member)
        reader.end()
        await importer.finish()
    finally:
        await importer.close()
    return direct.seconds


async def timed(work, rounds: int) -> list[float]:
    samples = []
    for n in range(rounds):
        started = time.perf_counter()
        await work(n)
        samples.append(time.perf_counter() - started)
    return samples


async def queries(vectors, triples, rounds: int, entities: int) -> dict[str, list[float]]:
    rng, vector_rng = random.Random(11), np.random.default_rng(11)

    def unit() -> list[float]:
        vector = vector_rng.standard_normal(DIMENSION)
        return (vector / np.linalg.norm(vector)).tolist()
    subgraph = subgraph_handler(triples)
    return {
        "chunks nearest a vector": await timed(
            lambda n: vectors.search_chunks(USER, COLLECTION, unit(), 10), rounds),
        "entities nearest a vector": await timed(
            lambda n: vectors.search_entities(USER, COLLECTION, unit(), 10), rounds),
        "lexical search": await timed(lambda n: vectors.search_lexical(
            USER, COLLECTION, " ".join(question_words(rng)), 10), rounds),
        "subgraph (5 seeds, 2 hops)": await timed(lambda n: subgraph(SubgraphRequest(
            user=USER, collection=COLLECTION, seeds=[
                Term.iri(entity_iri(f"entity {rng.randrange(entities)}")) for _ in range(5)]),
            CONTEXT), rounds),
    }


async def _stores_only(chunks: int, triples: int, args, core_file) -> dict:
    core, made = core_file(args.work, chunks, triples)
    data = Path(tempfile.mkdtemp(prefix="tg-scale-stores-", dir=args.work))
    settings = StoreSettings(tg_data_dir=str(data))
    vectors, graph = open_vector_store(settings), await open_triples_store(settings)
    try:
        started = time.perf_counter()
        seconds = await import_directly(core, {
            "core-vectors": core_vectors_handler(vectors),
            "core-triples": core_triples_handler(graph),
            "core-documents": core_documents_handler(LibraryStore(data))})
        result = {"stores only": True, "core MB": made["bytes"] / 1e6,
                  "import s": time.perf_counter() - started, "import s by part": seconds}
        result["unindexed"] = await queries(vectors, graph, args.rounds, triples // 5)
        started = time.perf_counter()
        try:
            await asyncio.wait_for(vectors.backend.wait_for_indexing(), args.index_wait)
            result["index s"] = time.perf_counter() - started
            result["indexed"] = await queries(vectors, graph, args.rounds, triples // 5)
        except TimeoutError:
            result["index s"] = None  # not built within --index-wait
        result["memory MB"] = {"stores (this process)": rss_mb(os.getpid()), **{
            command(child): rss_mb(child) for child in children(os.getpid())
            if command(child) == "edge_shards"}}
        result["disk MB"] = disk(data)
        return result
    finally:
        await vectors.close()
        await graph.close()
        shutil.rmtree(data, ignore_errors=True)


def stores_only(size: str, chunks: int, triples: int, args, core_file) -> dict:
    return asyncio.run(_stores_only(chunks, triples, args, core_file))


def report(size: str, chunks: int, triples: int, result: dict) -> str:
    rows = [("core (synthetic) MB / import s", f"{result['core MB']:.0f} / "
                                               f"{result['import s']:.0f} (" + ", ".join(
             f"{part} {s:.0f}" for part, s in result["import s by part"].items()) + ")"),
            ("Edge index build after import s",
             "not within --index-wait" if result["index s"] is None
             else f"{result['index s']:.0f}")]
    for state in ("unindexed", "indexed"):
        for name, samples in result.get(state, {}).items():
            rows.append((f"{name}, {state}: p50 / p95 ms",
                         f"{ms(median(samples)).strip()} / {ms(percentile(samples, 95)).strip()}"))
    rows += [("resident MB", ", ".join(f"{name} {mb:.0f}"
                                       for name, mb in result["memory MB"].items())),
             ("disk MB", ", ".join(f"{name} {mb:.0f}"
                                   for name, mb in result["disk MB"].items()))]
    return "\n".join([f"\n### {size}: {chunks} chunks, {triples} triples (stores only)\n",
                      "| | |", "|---|---|", *(f"| {name} | {value} |" for name, value in rows)])
