"""``python -m bench.ingestion``: chunks/s through the ingestion pipeline against the
raw rate of the same embedding model on the same texts, measured in the same run.

The corpus is the Python language reference that ships with Python (``pydoc_data``),
cut into documents of about ``--document-chars`` characters; the texts are what the
pipeline's own code makes of them (bench/ingestion_texts.py): the decoder's chunks,
and the entity texts of the default extractor, per mention and once per collection.

* raw: all-MiniLM-L6-v2 as the embeddings service runs it, on the chunks alone (the
  chunk path's ceiling), on the chunks and every mention's entity text, and on the
  chunks and each entity once (the default pipeline's ceilings, as it embedded
  entities before and after it remembered them). Measured before every round, in
  this process while the stack idles;
* pipeline, chunk path: ``tg-start`` with librarian, decoder, embeddings with
  chunk-embeddings (one process, as the default stack runs them) and the vector
  store's owner (and the gateway). Each round
  loads the documents into a collection of its own through the client library,
  ``LOADS_AT_ONCE`` at a time; the clock runs from the first load until
  ``load-status`` says every document is done, i.e. every chunk vector is stored in
  Qdrant Edge (asked, as ``tg-load-text --wait`` asks, for pending documents only);
* pipeline, full (the default pipeline): the same plus noun-phrase extraction,
  entity embedding and the triples store, which share the two cores (and the
  model) with chunk embedding: chunks/s to every chunk vector stored, and to every
  chunk's graph sent to the stores (its triples, and a vector for each of its
  entities: ``graph_sent``, read on the stage topics, the same for any version of
  the code).

Other work on the machine only ever slows a measurement down, so each line reports
its best round (and the median). CPU seconds per chunk of each process (with the
processes it started) in each path's best round show where the time goes; in the
full path the embeddings process's share is split into the model's time on chunks
and on entity texts (from the raw rounds) and the rest (the stages, JSON, the bus).
Deliveries that failed and were redone are counted from the processors' log. The
load average is printed: on a shared machine every rate is lower.
"""
import argparse
import asyncio
import os
import re
import statistics
import time
from pathlib import Path

from bench.cpu import cpu_seconds
from bench.ingestion_texts import Raw, pipeline_texts
from tests.support.ingest import StageWatch
from tests.support.stack import Stack
from trustgraph.api import AsyncTrustGraph

# The default stack's processes (run/registry.py), less the ones that answer questions.
CHUNK_PATH = ["librarian", "decoder", "embeddings+chunk-embeddings", "vector-store", "gateway"]
FULL = ["librarian", "decoder", "embeddings+chunk-embeddings+entity-embeddings", "extract",
        "triples-store", "vector-store", "gateway"]
USER = "bench"
LOADS_AT_ONCE = 8
# Seconds between load-status requests (tg-load-* --wait asks every 0.5 s): the end
# of a round is seen up to this late, which a round's time includes.
POLL = 0.1
DEADLINE = 600.0  # seconds for one round, however slow the machine
# What a stage logs when a delivery failed and its record will come again.
REDONE = re.compile(r"failed \(delivery \d+ of at most \d+\)")


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


def graph_sent(watch: StageWatch, collection: str, chunks: int) -> bool:
    """Every chunk's triples sent to the triples store, and as many entity vectors
    sent to the vector store as the chunks' entity records named entities."""
    def ours(records):
        return [r for r in records if r.document.collection == collection]
    triples = {r.chunk_id for r in ours(watch.seen["triples"])}
    entities = ours(watch.seen["entities"])
    named = sum(len({e.entity for e in r.entities if e.label.strip()}) for r in entities)
    vectors = sum(len(r.entities) for r in ours(watch.seen["entity-vectors"]))
    return len(triples) >= chunks and len({r.chunk_id for r in entities}) >= chunks \
        and vectors >= named


async def load_and_wait(client: AsyncTrustGraph, docs: list[tuple[str, str]], collection: str,
                        watch: StageWatch | None, chunks: int = 0
                        ) -> tuple[float, float | None]:
    """Seconds from the first load until every chunk vector is stored, and (with
    ``watch``) until every chunk's graph is sent (``graph_sent``)."""
    slots = asyncio.Semaphore(LOADS_AT_ONCE)
    scope = {"user": USER, "collection": collection}

    async def load(id: str, text: str) -> None:
        async with slots:
            await client.load_text(text, id, title=id, **scope)

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
        if watch is not None and extracted_at is None and graph_sent(watch, collection,
                                                                      chunks):
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
            redone = len(REDONE.findall(stack.log()))
            stored, extracted = await load_and_wait(
                client, docs, f"{'full' if full else 'chunks'}-{n}", watch,
                len(raw.texts.chunks))
            cpu = {name: process_cpu(pid) - before[name] for name, pid in pids.items()}
            cpu["bench client (loads, status)"] = cpu_seconds(os.getpid()) - own
            now_busy, now_total = machine_cpu()
            cpu["everything else on the machine"] = (now_busy - busy) - sum(cpu.values())
            cpu["idle"] = (now_total - total) - (now_busy - busy)
            results.append({"stored": stored, "extracted": extracted, "cpu": cpu,
                            "redone": len(REDONE.findall(stack.log())) - redone})
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


def cpu_table(title: str, result: dict, chunks: int, split: dict[str, float]) -> None:
    """Where the CPU of one round went, per chunk; ``split``: parts of the embeddings
    process's time, by what (from the raw rounds)."""
    print(f"\n| {title} | CPU s | CPU ms per chunk |\n|---|---|---|")
    for name, seconds in sorted(result["cpu"].items(), key=lambda item: -item[1]):
        print(f"| {name} | {seconds:.2f} | {seconds / chunks * 1000:.1f} |")
        if name.startswith("embeddings") and split:
            rest = seconds
            for part, part_seconds in split.items():
                print(f"| &nbsp;&nbsp;of which {part} | {part_seconds:.2f} | "
                      f"{part_seconds / chunks * 1000:.1f} |")
                rest -= part_seconds
            print(f"| &nbsp;&nbsp;of which the rest (stages, JSON, bus) | {rest:.2f} | "
                  f"{rest / chunks * 1000:.1f} |")


def model_cpu(raw: Raw, entity_set: str) -> dict[str, float]:
    """The model's CPU on the chunks and on ``entity_set``, as the raw rounds took it
    (their least: other work only adds to it)."""
    return {"the model on chunks (raw)": min(raw.cpu["chunks"]),
            f"the model on entity texts, {entity_set} (raw)": min(raw.cpu[entity_set])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--documents", type=int, default=40)
    parser.add_argument("--document-chars", type=int, default=6000)
    parser.add_argument("--rounds", type=int, default=3, help="of the chunk path (0: skip it)")
    parser.add_argument("--full-rounds", type=int, default=2,
                        help="of the full pipeline (0: skip it)")
    parser.add_argument("--entities", choices=("mentions", "entities"), default="entities",
                        help="the entity texts the full pipeline is taken to embed, for "
                             "its CPU split: every mention's, or each entity once")
    args = parser.parse_args()
    docs = documents(args.documents, args.document_chars)
    texts = pipeline_texts(docs)
    n = len(texts.chunks)
    print(f"{len(docs)} documents, {n} chunks, {len(texts.mentions)} entity mentions, "
          f"{len(texts.entities)} distinct entities (extraction: "
          f"{texts.extract_seconds / n * 1000:.1f} ms of one core per chunk, here); "
          f"load average {os.getloadavg()[0]:.2f} at the start", flush=True)
    raw = Raw(texts)
    path = run(CHUNK_PATH, docs, raw, args.rounds, False) if args.rounds else []
    full = run(FULL, docs, raw, args.full_rounds, True) if args.full_rounds else []
    references = {"chunks alone": raw.chunk_rates(),
                  "chunks + every mention's entity text": raw.chunk_rates("mentions"),
                  "chunks + each entity once": raw.chunk_rates("entities")}
    chunks_only, mentions, once = (max(rates) for rates in references.values())
    print("| measure | chunks | rounds | best chunks/s | median chunks/s | best vs raw |")
    print("|---|---|---|---|---|---|")
    for name, rates in references.items():
        print(line(f"raw model: {name} (reference)", n, rates, max(rates)))
    if path:
        print(line("pipeline, chunk path: every chunk vector stored (vs chunks alone)", n,
                   [n / r["stored"] for r in path], chunks_only))
    if full:
        print(line("pipeline, full: every chunk vector stored (vs chunks + entities "
                   "once)", n, [n / r["stored"] for r in full], once))
        print(line("pipeline, full: every chunk's graph sent (vs chunks + entities once)",
                   n, [n / r["extracted"] for r in full], once))
        print(line("pipeline, full: every chunk's graph sent (vs chunks + every mention)",
                   n, [n / r["extracted"] for r in full], mentions))
    print(f"\nthe model's CPU per chunk, raw (its least round): chunks "
          f"{min(raw.cpu['chunks']) / n * 1000:.1f} ms; entity texts of every mention "
          f"{min(raw.cpu['mentions']) / n * 1000:.1f} ms, of each entity once "
          f"{min(raw.cpu['entities']) / n * 1000:.1f} ms")
    redone = sum(r["redone"] for r in path + full)
    print(f"\ndeliveries failed and redone (processors' log): {redone}")
    if path:
        cpu_table("process, chunk path's best round (with what it started)",
                  min(path, key=lambda r: r["stored"]), n, {})
    if full:
        cpu_table("process, full pipeline's best round (with what it started)",
                  min(full, key=lambda r: r["extracted"]), n,
                  model_cpu(raw, args.entities))
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
