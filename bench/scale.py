"""``python -m bench.scale``: the platform at 10k and 100k chunks (with 100k and 1M
triples), and its stores alone at 1M chunks and 1M triples.

Each collection is built by importing a synthetic knowledge core (``bench.scale_core``:
random unit vectors around clumps, Zipfian text, extraction-named entities) through
the gateway, as ``tg-import-core`` does, into ``tg-start`` running the answering stack
on the embedded stores. Then, per size:

* import: the core's size and the time to store it; the Qdrant Edge index builds that
  follow (in the background, at low priority; waited for up to ``--index-wait``);
* export of the whole collection back to a core: time and size;
* start-up: tg-start to ``ready`` on the filled data dir, and to the first answer;
* document-rag and graph-rag time to metadata (request → sources frame), one question
  at a time, p50/p95 (default retrieval: hybrid search, mixed graph);
* LazyRAG: the cold community computation (its ``compute_seconds``), graph-rag's
  added TTFT while one runs against nothing running (p95), and time to metadata with
  communities cached;
* resident memory of each process (and the children they run), and disk per store.

``--sizes 1m`` runs the stores alone, in this process: the same import code (the
store owners' core services, without the bus), then vector, lexical and subgraph
queries at 1M chunks / 1M triples before and after Edge's index exists.

The LLM is a scripted OpenAI-format server (first token after 200 ms, then every
10 ms). Quiet machine: ``python -m bench.scale --sizes 10k,100k,1m`` (see the
module's ``--help``; ~1 h on 2 cores, most of it Edge's index builds).
"""
import argparse
import asyncio
import json
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from bench import clients, scale_stores
from bench.lazyrag import Socket, cold, graph_rag, lazy, new_version
from bench.rag import ask
from bench.scale_core import question_words, synthesize
from bench.stats import median, ms, percentile
from bench.streaming import llm_server
from tests.support.stack import Stack
from trustgraph.api import AsyncTrustGraph

USER, COLLECTION = "bench", "default"  # as bench.rag and bench.lazyrag ask
SIZES = {"10k": (10_000, 100_000), "100k": (100_000, 1_000_000),
         "1m": (1_000_000, 1_000_000)}
PROCESSORS = ["config", "prompt+text-completion+graph-rag+document-rag+lazy-rag",
              "embeddings", "librarian", "triples-store", "vector-store", "gateway"]
INDEXED = re.compile(r"indexed vector shard (chunks|entities)-\w+ in ([\d.]+) s \((\w+)")


def log(text: str) -> None:
    print(f"bench.scale: {text}", file=sys.stderr, flush=True)


def core_file(work: Path, chunks: int, triples: int) -> tuple[Path, dict]:
    path = work / f"core-{chunks}-{triples}.tgz"
    if path.exists():
        return path, {"bytes": path.stat().st_size, "seconds": None}
    made = synthesize(path, chunks, triples)
    log(f"synthesized {path.name}: {made['bytes'] / 1e6:.0f} MB in {made['seconds']:.0f} s")
    return path, made


# --- the full stack ------------------------------------------------------------------

async def import_core(stack: Stack, path: Path) -> tuple[float, dict]:
    async def pieces():
        with open(path, "rb") as file:
            while data := file.read(1 << 20):
                yield data
    started = time.perf_counter()
    async with AsyncTrustGraph(stack.gateway_url) as client:
        answer = await client.import_core(pieces(), COLLECTION, USER)
    return time.perf_counter() - started, answer["stored"]


async def export_core(stack: Stack, path: Path) -> float:
    started = time.perf_counter()
    async with AsyncTrustGraph(stack.gateway_url) as client:
        with open(path, "wb") as file:
            async for data in client.export_core(COLLECTION, USER):
                file.write(data)
    return time.perf_counter() - started


def wait_indexed(stack: Stack, wanted: set[str], deadline: float) -> dict[str, float]:
    """The Edge index builds logged (space kind → seconds), waiting for ``wanted``."""
    end = time.monotonic() + deadline
    while True:
        built = {kind: float(seconds) for kind, seconds, how in INDEXED.findall(stack.log())
                 if how == "swapped"}
        if wanted <= set(built) or time.monotonic() > end:
            return built
        time.sleep(2)


def ready_seconds(stack: Stack) -> float:
    return float(re.findall(r"ready in ([\d.]+) s", stack.log())[-1])


async def first_answer(stack: Stack) -> float:
    """From ``ready`` to the first document-rag sources (models loaded, stores opened)."""
    async with aiohttp.ClientSession() as session:
        ws = await session.ws_connect(f"ws://127.0.0.1:{stack.gateway_port}/api/v1/socket",
                                      max_msg_size=0)
        started = time.perf_counter()
        await ask(ws, "document-rag", "warm up")
        await ws.close()
    return time.perf_counter() - started


async def rag_latency(stack: Stack, rounds: int) -> dict[str, list[float]]:
    rng, found = random.Random(5), {"document-rag": [], "graph-rag": []}
    async with aiohttp.ClientSession() as session:
        ws = await session.ws_connect(f"ws://127.0.0.1:{stack.gateway_port}/api/v1/socket",
                                      max_msg_size=0)
        for service in found:  # warm-up
            await ask(ws, service, "warm up")
        for n in range(rounds):
            a, b, c = question_words(rng)
            found["document-rag"].append((await ask(
                ws, "document-rag", f"What is said about {a}, {b} and {c}?"))[0])
            found["graph-rag"].append((await ask(
                ws, "graph-rag", f"How is entity {n * 37} related to entity {n * 91}?"))[0])
        await ws.close()
    return found


async def lazy_rag(stack: Stack, llm_url: str, entities: int, rounds: int,
                   computations: int) -> dict:
    rng = random.Random(3)
    found: dict = {"outside": [], "during": [], "computing": [], "cold": [],
                   "computations": [], "warm": [], "direct": []}
    async with aiohttp.ClientSession() as session:
        socket = Socket(await session.ws_connect(
            f"ws://127.0.0.1:{stack.gateway_port}/api/v1/socket", max_msg_size=0))
        await graph_rag(socket, "warm up")
        for _ in range(10):  # the LLM's own time to first token, straight
            found["direct"].append((await clients.direct(session, llm_url))[0])
        for n in range(computations):
            if n:
                await new_version(socket, n)
            await cold(socket, rng, entities, found)
        for _ in range(rounds):
            found["warm"].append(await lazy(socket, f"How is entity {rng.randrange(entities)}"
                                            f" related to entity {rng.randrange(entities)}?",
                                            True))
        socket.reader.cancel()
    return found


def memory(stack: Stack) -> dict[str, float]:
    """Resident MB of each part's process and of each child it runs."""
    found = {}
    for name, pid in sorted(stack.pids().items()):
        found[name] = scale_stores.rss_mb(pid)
        if name == "tg-start":
            continue  # its children are the parts themselves
        for child in scale_stores.children(pid):
            found[f"{name} > {scale_stores.command(child)}"] = scale_stores.rss_mb(child)
    return found


def full_stack(size: str, args: argparse.Namespace, llm_url: str) -> dict:
    chunks, triples = SIZES[size]
    core, made = core_file(args.work, chunks, triples)
    result: dict = {"core MB": made["bytes"] / 1e6, "synthesized s": made["seconds"]}
    stack = Stack(env={"OPENAI_BASE_URL": f"{llm_url}/v1", "TG_LLM": "openai",
                       "TG_LOG_LEVEL": "INFO", "LAZY_RAG_ENABLED": "true"},
                  processors=PROCESSORS, startup_timeout=600.0)
    with stack:
        result["empty start s"] = ready_seconds(stack)
        log(f"{size}: importing {core.name}")
        result["import s"], result["stored"] = asyncio.run(import_core(stack, core))
        log(f"{size}: imported in {result['import s']:.0f} s; waiting for Edge's indexes")
        started = time.monotonic()
        result["index s"] = wait_indexed(stack, {"chunks", "entities"} if chunks >= 20_000
                                         else {"entities"}, args.index_wait)
        result["index wait s"] = time.monotonic() - started
        exported = args.work / f"export-{size}.tgz"
        result["export s"] = asyncio.run(export_core(stack, exported))
        result["export MB"] = exported.stat().st_size / 1e6
        exported.unlink()
        stack.stop()
        stack.start()
        result["start s"] = ready_seconds(stack)
        result["first answer s"] = asyncio.run(first_answer(stack))
        result["rag"] = asyncio.run(rag_latency(stack, args.rounds))
        result["lazy"] = asyncio.run(lazy_rag(stack, llm_url, triples // 5, args.rounds,
                                              args.computations))
        result["memory MB"] = memory(stack)
        result["disk MB"] = scale_stores.disk(stack.data_dir)
    return result


# --- the report ------------------------------------------------------------------------

def report(size: str, result: dict) -> str:
    chunks, triples = SIZES[size]
    if "stores only" in result:
        return scale_stores.report(size, chunks, triples, result)
    rag, lazy_found = result["rag"], result["lazy"]
    llm_first = median(lazy_found["direct"])

    def added(key: str) -> list[float]:
        return [first - llm_first for _, first, _, _ in lazy_found[key]]

    warm_metadata = [m for m, _, _, _ in lazy_found["warm"]]
    seconds = [s["compute_seconds"] for s in lazy_found["computations"]]
    rows = [
        ("core (synthetic) MB / import s / export s, MB",
         f"{result['core MB']:.0f} / {result['import s']:.0f} / "
         f"{result['export s']:.0f}, {result['export MB']:.0f}"),
        ("Edge index builds after import, s", ", ".join(
            f"{kind} {s:.0f}" for kind, s in result["index s"].items()) or "none done"),
        ("start-up: empty / filled to ready s / then to first answer s",
         f"{result['empty start s']:.1f} / {result['start s']:.1f} / "
         f"{result['first answer s']:.1f}"),
        *((f"{service} time to metadata p50 / p95 ms",
           f"{ms(median(samples)).strip()} / {ms(percentile(samples, 95)).strip()}")
          for service, samples in rag.items()),
        ("lazy-rag cold community computation s", ", ".join(f"{s:.1f}" for s in seconds)),
        ("lazy-rag cached time to metadata p50 / p95 ms",
         f"{ms(median(warm_metadata)).strip()} / {ms(percentile(warm_metadata, 95)).strip()}"),
        ("graph-rag added TTFT p95 ms: nothing computing / during computation",
         f"{ms(percentile(added('outside'), 95)).strip()} / "
         f"{ms(percentile(added('computing') or added('during'), 95)).strip()} "
         f"({len(lazy_found['computing'])} asked while computing)"),
        ("resident MB", ", ".join(f"{name} {mb:.0f}"
                                  for name, mb in result["memory MB"].items())),
        ("disk MB", ", ".join(f"{name} {mb:.0f}" for name, mb in result["disk MB"].items())),
    ]
    return "\n".join([f"\n### {size}: {chunks} chunks, {triples} triples\n",
                      "| | |", "|---|---|", *(f"| {name} | {value} |" for name, value in rows)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10k,100k,1m",
                        help="comma list of 10k, 100k (full stack), 1m (stores only)")
    parser.add_argument("--rounds", type=int, default=30, help="questions per measure")
    parser.add_argument("--computations", type=int, default=3,
                        help="cold community computations (graph-rag asked during each)")
    parser.add_argument("--index-wait", type=float, default=1800.0,
                        help="seconds to wait for Edge's index builds after an import")
    parser.add_argument("--work", type=Path, help="where the synthetic cores are kept "
                        "between runs (default: a temporary directory)")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    args = parser.parse_args()
    sizes = [size.strip() for size in args.sizes.split(",") if size.strip()]
    if unknown := set(sizes) - set(SIZES):
        parser.error(f"unknown sizes {sorted(unknown)}; known: {', '.join(SIZES)}")
    temporary = args.work is None
    args.work = Path(tempfile.mkdtemp(prefix="tg-scale-")) if temporary else args.work
    args.work.mkdir(parents=True, exist_ok=True)
    results = {}
    try:
        with llm_server(50, 0.2, 0.01) as url:
            for size in sizes:
                started = time.monotonic()
                results[size] = (scale_stores.stores_only(size, *SIZES[size], args,
                                                          core_file) if size == "1m"
                                 else full_stack(size, args, url))
                log(f"{size} done in {time.monotonic() - started:.0f} s")
                print(report(size, results[size]), flush=True)
    finally:
        if temporary:
            shutil.rmtree(args.work, ignore_errors=True)
        if args.json:
            args.json.write_text(json.dumps(results, default=str, indent=1))


if __name__ == "__main__":
    main()
