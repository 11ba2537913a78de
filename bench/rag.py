"""``make bench`` (RAG part): what GraphRAG and DocumentRAG add on top of the LLM, at
10k chunks / 100k triples.

The stores are filled before ``tg-start`` opens them, the way the ingestion pipeline
leaves them: 10k chunk vectors (1k documents of 10 chunks, ~600 characters each),
100k triples (20k labelled entities, 80k edges, each with its chunk and document as
provenance) and 20k entity vectors. Vectors are random unit vectors: search costs
the same as with real ones, and the question is still embedded by the real model
(the stores are stamped with its name, as the pipeline stamps them).

A scripted OpenAI-format server (its own process; first token after 200 ms, then one
every 10 ms) is the LLM. One question at a time over the gateway websocket, in rounds
of: straight from the LLM server, document-rag, graph-rag. Per service:

* time to metadata: request sent → the sources frame;
* added TTFT: first answer token, minus the LLM's own TTFT measured straight;
* added total: last frame, minus the LLM's own whole stream.
"""
import argparse
import asyncio
import itertools
import json
import random
import shutil
import sys
import time
from pathlib import Path

import aiohttp
import numpy as np

from bench import clients
from bench.stats import median, ms, percentile
from bench.stores import graph
from bench.streaming import llm_server
from tests.support.stack import Stack
from trustgraph.embeddings.minilm.model_files import MODEL_NAME
from trustgraph.storage.settings import StoreSettings
from trustgraph.storage.triples.configured import open_triples_store
from trustgraph.storage.vectors.configured import open_vector_store
from trustgraph.storage.vectors.store import ChunkVector, EntityVector

USER, COLLECTION = "bench", "default"
DIMENSION = 384
CHUNKS_PER_DOCUMENT = 10
# The answering part of the default stack, in its process groups; no ingestion.
PROCESSORS = ["config", "prompt+text-completion+graph-rag+document-rag", "embeddings",
              "triples-store", "vector-store", "gateway"]
WORDS = ("graph retrieval answer token stream broker chunk entity vector store query "
         "collection tenant latency document model prompt source relation label").split()

_ids = itertools.count()


def unit_vectors(count: int, rng: np.random.Generator) -> np.ndarray:
    vectors = rng.standard_normal((count, DIMENSION)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def chunk_text(index: int, rng: random.Random) -> str:
    return f"Passage {index}. " + " ".join(rng.choice(WORDS) for _ in range(80)) + "."


def chunk_of(index: int) -> tuple[str, str]:
    """(document id, chunk id) of chunk ``index``."""
    document = f"doc-{index // CHUNKS_PER_DOCUMENT}"
    return document, f"{document}/c{index % CHUNKS_PER_DOCUMENT}"


async def fill_stores(data_dir: Path, chunks: int, triples: int) -> None:
    settings = StoreSettings(tg_data_dir=str(data_dir))
    rng, np_rng = random.Random(7), np.random.default_rng(7)
    started = time.perf_counter()
    vectors = open_vector_store(settings)
    for start in range(0, chunks, 1000):
        batch = range(start, min(chunks, start + 1000))
        embedded = unit_vectors(len(batch), np_rng)
        await vectors.upsert_chunks(USER, COLLECTION, [
            ChunkVector(chunk_id=chunk_of(i)[1], document=chunk_of(i)[0],
                        vector=embedded[n].tolist(), text=chunk_text(i, rng),
                        title=f"Document {i // CHUNKS_PER_DOCUMENT}")
            for n, i in enumerate(batch)], model=MODEL_NAME)
    statements, entities = graph(triples, rng)
    for start in range(0, len(entities), 1000):
        batch = entities[start:start + 1000]
        embedded = unit_vectors(len(batch), np_rng)
        await vectors.upsert_entities(USER, COLLECTION, [
            EntityVector(entity=e, vector=embedded[n].tolist(),
                         label=f"entity {start + n}", document=chunk_of(start + n)[0])
            for n, e in enumerate(batch)], model=MODEL_NAME)
    await vectors.close()
    store = await open_triples_store(settings)
    per_chunk = max(1, len(statements) // chunks)
    for index, start in enumerate(range(0, len(statements), per_chunk)):
        document, chunk = chunk_of(index % chunks)
        await store.add(USER, COLLECTION, statements[start:start + per_chunk],
                        document=document, chunk=chunk)
    await store.close()
    print(f"stores filled in {time.perf_counter() - started:.0f} s: {chunks} chunks, "
          f"{len(statements)} triples, {len(entities)} entity vectors",
          file=sys.stderr, flush=True)


async def ask(ws: aiohttp.ClientWebSocketResponse, service: str, question: str,
              **options: object) -> tuple[float, float, float]:
    """(time to metadata, time to first token, total) of one streamed answer."""
    request_id = f"r{next(_ids)}"
    started = time.perf_counter()
    metadata = first = None
    await ws.send_str(json.dumps({"id": request_id, "service": service, "request": {
        "query": question, "user": USER, "collection": COLLECTION, "streaming": True,
        **options}}))
    async for message in ws:
        frame = json.loads(message.data)
        response = frame.get("response") or {}
        if "error" in frame or "error" in response:
            raise RuntimeError(f"{service}: {frame}")
        now = time.perf_counter()
        if metadata is None and response.get("message_type") == "metadata":
            metadata = now
        if first is None and response.get("chunk"):
            first = now
        if frame["complete"]:
            if metadata is None or first is None:
                raise RuntimeError(f"{service}: stream ended without metadata or answer")
            return metadata - started, first - started, now - started
    raise RuntimeError("socket closed")


async def measure(gateway: str, llm_url: str, rounds: int, rerank: bool = False
                  ) -> dict[str, list]:
    questions = [f"How does the {a} relate to the {b}?"
                 for a, b in itertools.permutations(WORDS[:8], 2)]
    found: dict[str, list] = {"direct": [], "document-rag": [], "graph-rag": []}
    async with aiohttp.ClientSession() as session:
        ws = await session.ws_connect(f"{gateway.replace('http', 'ws', 1)}api/v1/socket",
                                      max_msg_size=0)
        for service in ("document-rag", "graph-rag"):  # warm-up: model, requesters
            await ask(ws, service, "warm up")
        for n in range(rounds):
            found["direct"].append(await clients.direct(session, llm_url))
            for service in ("document-rag", "graph-rag"):
                options = {"rerank": True} if rerank and service == "document-rag" else {}
                found[service].append(await ask(ws, service, questions[n % len(questions)],
                                                **options))
        await ws.close()
    return found


def report(found: dict[str, list]) -> str:
    direct_first = median([first for first, _ in found["direct"]])
    direct_total = median([total for _, total in found["direct"]])
    lines = ["| service | questions | time to metadata p50 ms | p95 ms | added TTFT p50 ms |"
             " p95 ms | added total p50 ms |", "|---|---|---|---|---|---|---|"]
    for service in ("document-rag", "graph-rag"):
        samples = found[service]
        metadata = [m for m, _, _ in samples]
        added_first = [f - direct_first for _, f, _ in samples]
        added_total = [t - direct_total for _, _, t in samples]
        lines.append(f"| {service} | {len(samples)} | {ms(median(metadata))} | "
                     f"{ms(percentile(metadata, 95))} | {ms(median(added_first))} | "
                     f"{ms(percentile(added_first, 95))} | {ms(median(added_total))} |")
    return "\n".join(lines)


def prepare_stores(data_dir: Path, args: argparse.Namespace) -> None:
    """Fill the stack's stores, or copy them from ``--stores`` (filled first if empty)."""
    if args.stores is None:
        asyncio.run(fill_stores(data_dir, args.chunks, args.triples))
        return
    if not any(args.stores.glob("*")):
        asyncio.run(fill_stores(args.stores, args.chunks, args.triples))
    shutil.copytree(args.stores, data_dir, dirs_exist_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--triples", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--tokens", type=int, default=50)
    # The defaults are hybrid search and mixed graph retrieval (--hybrid, kept for old
    # command lines, sets them explicitly); --plain measures what came before them.
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--plain", action="store_true",
                       help="vector search and plain graph retrieval (TG_RETRIEVAL=vector, "
                            "TG_GRAPH_MIX=false)")
    modes.add_argument("--hybrid", action="store_true",
                       help="hybrid search and mixed graph retrieval (TG_RETRIEVAL=hybrid, "
                            "TG_GRAPH_MIX=true): the defaults")
    parser.add_argument("--rerank", action="store_true", help=(
        "document-rag reranks through the LLM (the scripted one: its first token after "
        "200 ms and --tokens tokens, which are no ranking, so the fused order stays)"))
    parser.add_argument("--stores", type=Path, help=(
        "a directory to fill the stores in once and copy them from on later runs "
        "(same --chunks and --triples), to compare builds without refilling"))
    args = parser.parse_args()
    with llm_server(args.tokens, 0.2, 0.01) as url:
        retrieval = ({"TG_RETRIEVAL": "vector", "TG_GRAPH_MIX": "false"} if args.plain
                     else {"TG_RETRIEVAL": "hybrid", "TG_GRAPH_MIX": "true"})
        stack = Stack(env={"OPENAI_BASE_URL": f"{url}/v1", "TG_LLM": "openai",
                           "TG_LOG_LEVEL": "WARNING", **retrieval},
                      processors=PROCESSORS, startup_timeout=120.0)
        prepare_stores(stack.data_dir, args)
        with stack:
            found = asyncio.run(measure(stack.gateway_url, url, args.rounds, args.rerank))
    print(f"\n{args.chunks} chunks, {args.triples} triples; "
          f"{'plain (vector, no graph mix)' if args.plain else 'hybrid, mixed graph'} "
          f"retrieval{', document-rag reranking' if args.rerank else ''}; one question at "
          f"a time; LLM "
          f"first token after 200 ms then every 10 ms ({args.tokens} tokens); "
          f"2-core machine\n")
    print(report(found))


if __name__ == "__main__":
    main()
