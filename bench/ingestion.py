"""``python -m bench.ingestion``: chunks/s through the ingestion pipeline against the
raw rate of the same embedding model, measured in the same run on the same chunks.

The corpus is the Python language reference that ships with Python (``pydoc_data``),
cut into documents of about ``--document-chars`` characters; the chunks are what
the decoder makes of them (its own code, default settings), so the model's raw rate
is measured on exactly the texts the pipeline embeds.

* raw: all-MiniLM-L6-v2 as the embeddings service runs it (onnxruntime, the
  service's run size), embedding every chunk in one call (sorted by length, so
  runs are padded the least): the ceiling. It is measured before every pipeline
  round, in this process while the stack idles;
* pipeline, chunk path: ``tg-start`` with librarian, decoder, embeddings,
  chunk-embeddings and the vector store's owner (and the gateway). Each round
  loads the documents into a collection of its own through the client library,
  ``LOADS_AT_ONCE`` at a time; the clock runs from the first load until
  ``load-status`` says every document is done, i.e. every chunk vector is stored in
  Qdrant Edge (asked, as ``tg-load-text --wait`` asks, for pending documents only);
* pipeline, full: the same plus LLM-free extraction, entity embedding and the
  triples store, which share the two cores (and the model: entity labels are
  embedded too) with chunk embedding: chunks/s to every chunk vector stored, and
  to every chunk extracted.

Other work on the machine only ever slows a measurement down, so each line reports
its best round (and the median); the ratio is best pipeline round to best raw
round. The target is a chunk path at 90 % or more of the raw rate. CPU seconds per
chunk of each process (with the processes it started) in the chunk path's best
round show where the time goes. The load average is printed: on a shared machine
every rate is lower.
"""
import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path

from bench.cpu import cpu_seconds
from tests.support.ingest import StageWatch
from tests.support.stack import Stack
from trustgraph.api import AsyncTrustGraph
from trustgraph.decoding import PLAIN
from trustgraph.embeddings.minilm.provider import MiniLm
from trustgraph.embeddings.provider import EmbeddingsSettings
from trustgraph.ingest.decoder import DecoderSettings, chunk_records, token_counter
from trustgraph.schema import DocumentMetadata

CHUNK_PATH = ["librarian", "decoder", "embeddings", "chunk-embeddings", "vector-store",
              "gateway"]
FULL = [*CHUNK_PATH[:-1], "extract", "entity-embeddings", "triples-store", "gateway"]
USER = "bench"
LOADS_AT_ONCE = 8
# Seconds between load-status requests (tg-load-* --wait asks every 0.5 s): the end
# of a round is seen up to this late, which a round's time includes.
POLL = 0.1
DEADLINE = 600.0  # seconds for one round, however slow the machine


def documents(count: int, chars: int) -> list[tuple[str, str]]:
    """``count`` (id, text) documents of about ``chars`` characters, cut at paragraphs."""
    import pydoc_data.topics
    topics = pydoc_data.topics.topics
    paragraphs = [p for key in sorted(topics) for p in topics[key].split("\n\n") if p.strip()]
    found, text = [], ""
    for paragraph in paragraphs:
        text += paragraph + "\n\n"
        if len(text) >= chars:
            found.append((f"doc-{len(found):03}.txt", text))
            text = ""
            if len(found) == count:
                return found
    raise SystemExit(f"the reference makes only {len(found)} documents of {chars} characters")


def chunk_texts(docs: list[tuple[str, str]]) -> list[str]:
    """The chunks the decoder makes of ``docs``."""
    settings = DecoderSettings()
    counter = token_counter(settings.tg_chunk_tokenizer)
    return [chunk.text for id, text in docs for chunk in chunk_records(
        DocumentMetadata(id=id, kind=PLAIN), text.encode(), PLAIN, settings.tg_chunk_size,
        settings.tg_chunk_overlap, counter)]


def process_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and of the processes it started (the vector store's
    shard process, for one)."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(entry.name) == pid or int(fields[1]) == pid:
                total += cpu_seconds(int(entry.name))
        except OSError:
            pass  # gone meanwhile
    return total


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields) - idle) / tick, sum(fields) / tick


class Raw:
    """The model as the embeddings service runs it, timed on ``chunks``."""

    def __init__(self, chunks: list[str]) -> None:
        settings = EmbeddingsSettings()
        self.chunks = chunks
        self.model = MiniLm(threads=settings.tg_embeddings_threads,
                            run_tokens=settings.tg_embeddings_run_tokens)
        self.model.embed(chunks[:8])  # warm up
        self.rates: list[float] = []

    def measure(self) -> None:
        started = time.perf_counter()
        self.model.embed(self.chunks)
        self.rates.append(len(self.chunks) / (time.perf_counter() - started))


async def load_and_wait(client: AsyncTrustGraph, docs: list[tuple[str, str]], collection: str,
                        watch: StageWatch | None, chunks: int = 0
                        ) -> tuple[float, float | None]:
    """Seconds from the first load until every chunk vector is stored, and (with
    ``watch``) until all ``chunks`` chunks of the collection have been extracted."""
    slots = asyncio.Semaphore(LOADS_AT_ONCE)
    scope = {"user": USER, "collection": collection}

    async def load(id: str, text: str) -> None:
        async with slots:
            await client.load_text(text, id, title=id, **scope)

    def extracted() -> bool:
        """Every chunk has sent its triples (each chunk of prose has key phrases)."""
        return watch is not None and len({r.chunk_id for r in watch.seen["triples"]
                                          if r.document.collection == collection}) >= chunks

    started = time.perf_counter()
    loading = asyncio.gather(*(load(id, text) for id, text in docs))
    pending, stored_at, extracted_at = {id for id, _ in docs}, None, None
    while stored_at is None or (watch and extracted_at is None):
        await asyncio.sleep(POLL)
        now = time.perf_counter() - started
        if now > DEADLINE:
            raise SystemExit(f"not done after {DEADLINE:g} s: {len(pending)} documents "
                             f"pending, extraction {'done' if extracted_at else 'not done'}")
        if stored_at is None:
            statuses = await client.load_status(sorted(pending), **scope)
            if failed := [s for s in statuses if s["state"] == "failed"]:
                raise SystemExit(f"the pipeline failed documents: {failed[:3]}")
            # "unknown": a document whose load is not answered yet.
            pending -= {s["id"] for s in statuses if s["state"] == "done"}
            if loading.done() and not pending:
                stored_at = now
        if extracted_at is None and extracted():
            extracted_at = now
    await loading
    return stored_at, extracted_at


async def rounds(stack: Stack, docs, raw: Raw, count: int, full: bool) -> list[dict]:
    """``count`` rounds of loading ``docs`` into fresh collections, each after a raw
    measurement; per round: seconds stored, seconds extracted, CPU per process."""
    watch = await StageWatch(stack.broker_url).start() if full else None
    results = []
    async with AsyncTrustGraph(stack.gateway_url) as client:
        # Warm-up: the first model runs, and the first writes to the vector store.
        await load_and_wait(client, docs[:2], "warm-up", None)
        pids = {name: pid for name, pid in stack.pids().items() if name != "tg-start"}
        for n in range(count):
            await asyncio.to_thread(raw.measure)  # the loop stays free for the socket
            before = {name: process_cpu(pid) for name, pid in pids.items()}
            own, (busy, total) = cpu_seconds(os.getpid()), machine_cpu()
            stored, extracted = await load_and_wait(
                client, docs, f"{'full' if full else 'chunks'}-{n}", watch, len(raw.chunks))
            cpu = {name: process_cpu(pid) - before[name] for name, pid in pids.items()}
            cpu["bench client (loads, status)"] = cpu_seconds(os.getpid()) - own
            now_busy, now_total = machine_cpu()
            cpu["everything else on the machine"] = (now_busy - busy) - sum(cpu.values())
            cpu["idle"] = (now_total - total) - (now_busy - busy)
            results.append({"stored": stored, "extracted": extracted, "cpu": cpu})
    if watch:
        await watch.close()
    return results


def run(processors: list[str], docs, raw: Raw, count: int, full: bool) -> list[dict]:
    with Stack(processors=processors, env={"TG_LOG_LEVEL": "WARNING"},
               startup_timeout=120) as stack:
        return asyncio.run(rounds(stack, docs, raw, count, full))


def line(measure: str, chunks: int, rates: list[float], reference: float) -> str:
    return (f"| {measure} | {chunks} | {len(rates)} | {max(rates):.1f} | "
            f"{statistics.median(rates):.1f} | {max(rates) / reference:.1%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--documents", type=int, default=40)
    parser.add_argument("--document-chars", type=int, default=6000)
    parser.add_argument("--rounds", type=int, default=3, help="of the chunk path")
    parser.add_argument("--full-rounds", type=int, default=2,
                        help="of the full pipeline (0: skip it)")
    args = parser.parse_args()
    docs = documents(args.documents, args.document_chars)
    chunks = chunk_texts(docs)
    print(f"{len(docs)} documents, {len(chunks)} chunks; load average "
          f"{os.getloadavg()[0]:.2f} at the start", flush=True)
    raw = Raw(chunks)
    path = run(CHUNK_PATH, docs, raw, args.rounds, False)
    full = run(FULL, docs, raw, args.full_rounds, True) if args.full_rounds else []
    best = max(raw.rates)
    n = len(chunks)
    print("| measure | chunks | rounds | best chunks/s | median chunks/s | best vs raw |")
    print("|---|---|---|---|---|---|")
    print(line("raw model (reference)", n, raw.rates, best))
    print(line("pipeline, chunk path: every chunk vector stored", n,
               [n / r["stored"] for r in path], best))
    if full:
        print(line("pipeline, full: every chunk vector stored", n,
                   [n / r["stored"] for r in full], best))
        print(line("pipeline, full: every chunk extracted", n,
                   [n / r["extracted"] for r in full], best))
    fastest = min(path, key=lambda r: r["stored"])
    print(f"\ntarget: the chunk path at >= 90 % of the raw rate "
          f"({0.9 * best:.1f} chunks/s here)\n")
    print("| process, chunk path's best round (with what it started) | CPU s "
          "| CPU ms per chunk |\n|---|---|---|")
    for name, seconds in sorted(fastest["cpu"].items(), key=lambda item: -item[1]):
        print(f"| {name} | {seconds:.2f} | {seconds / n * 1000:.1f} |")
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
