"""``python -m bench.retrieval``: does retrieval find the right document? Recall@1/@5/@10
and MRR@10 of vector-only, lexical-only and hybrid document retrieval and of graph
mode (by cited document), through the public API (``POST /api/v1/query``, streamed;
the clock stops at the metadata line), plus the time to that line.

The data set: no public question→document set (BEIR, SQuAD, …) ships inside a PyPI
package in the package lists searched (``beir``, ``ir-datasets``, ``mteb`` and
``pyserini`` download their data at run time; ``squaddata``, ``squad-df`` and
``natural-questions`` hold no data). So the corpus is public text that ships with
Python itself: the docstrings of the standard library's functions and classes. Each
docstring with a summary line of 30+ characters and a body of 200+ characters is a
document (title: its qualified name, text: the body), and its summary line is the
question ("Return the fields of a dataclass instance as a new dictionary…" →
``dataclasses.asdict``): known-item search, as the issue's own test was. Nothing is
fetched; the set is what this Python ships (its version is printed).

The stack is ``tg-start``'s default (LLM-free key-phrase extraction feeds graph
mode); the LLM is a scripted local server (only the metadata line is read). Fusion
settings (k, weights) are also compared offline, by fusing the vector and lexical
rankings the API returned with ``trustgraph.retrieval.fusion.fuse``.
"""
import argparse
import asyncio
import importlib
import inspect
import json
import statistics
import sys
import time
from dataclasses import dataclass, field

import aiohttp

from tests.support.ingest import StageWatch
from tests.support.stack import Stack, openai_server_thread
from trustgraph.api import AsyncTrustGraph
from trustgraph.retrieval.fusion import Ranking, fuse

USER, COLLECTION = "bench", "stdlib"
DEPTH = 10  # sources asked for, and the deepest rank scored
SKIPPED = {"antigravity", "this", "idlelib", "turtledemo", "tkinter", "turtle", "test",
           "lib2to3", "ensurepip", "venv"}
MODES = {"vector": {"mode": "document", "retrieval": "vector"},
         "lexical": {"mode": "document", "retrieval": "lexical"},
         "hybrid": {"mode": "document", "retrieval": "hybrid"},
         "graph": {"mode": "graph"}}


@dataclass(frozen=True)
class Item:
    id: str  # the qualified name: the document's id and title
    question: str
    text: str


def corpus(limit: int) -> list[Item]:
    """The standard library's docstrings as (question, document) pairs, sorted."""
    items = []
    for module_name in sorted(sys.stdlib_module_names):
        if module_name.startswith("_") or module_name in SKIPPED:
            continue
        try:
            module = importlib.import_module(module_name)
        except Exception:
            continue
        items += module_items(module_name, module)
    return items[:limit] if limit else items


def module_items(module_name: str, module) -> list[Item]:
    items = []
    for name, value in sorted(vars(module).items()):
        if name.startswith("_") or not (inspect.isfunction(value) or inspect.isclass(value)):
            continue
        if getattr(value, "__module__", None) != module_name:
            continue
        summary, _, body = (inspect.getdoc(value) or "").partition("\n\n")
        summary, body = " ".join(summary.split()), body.strip()
        if len(summary) >= 30 and len(body) >= 200:
            items.append(Item(f"{module_name}.{name}", summary, body))
    return items


async def load(stack: Stack, items: list[Item], user: str = USER,
               collection: str = COLLECTION) -> None:
    """Every document loaded (its ``title``, else its id, as title); returns once
    its chunks are stored and extracted."""
    watch = await StageWatch(stack.broker_url).start()
    started = time.perf_counter()
    async with AsyncTrustGraph(stack.gateway_url) as client:
        slots = asyncio.Semaphore(8)

        async def one(item: Item) -> None:
            async with slots:
                await client.load_text(item.text, item.id,
                                       title=getattr(item, "title", item.id), user=user,
                                       collection=collection)
        await asyncio.gather(*(one(item) for item in items))
        await wait_stored(client, {item.id for item in items}, user, collection)
    stored = time.perf_counter() - started
    await wait_extracted(watch)
    await watch.close()
    print(f"loaded {len(items)} documents ({watch.count('chunks')} chunks): stored in "
          f"{stored:.0f} s, extracted in {time.perf_counter() - started:.0f} s",
          file=sys.stderr, flush=True)


async def wait_stored(client: AsyncTrustGraph, pending: set[str], user: str = USER,
                      collection: str = COLLECTION) -> None:
    while pending:
        await asyncio.sleep(0.5)
        ids = sorted(pending)
        statuses = [status for start in range(0, len(ids), 1000)  # load-status' limit
                    for status in await client.load_status(ids[start:start + 1000],
                                                           user=user, collection=collection)]
        if failed := [s for s in statuses if s["state"] == "failed"]:
            raise SystemExit(f"the pipeline failed documents: {failed[:3]}")
        pending -= {s["id"] for s in statuses if s["state"] == "done"}


async def wait_extracted(watch: StageWatch) -> None:
    """Until every chunk's triples and every entity record's vectors have passed,
    and nothing new has arrived for two seconds (the stores write what they read)."""
    last, quiet_since = None, time.monotonic()
    while True:
        await asyncio.sleep(0.5)
        chunks = {c.id for c in watch.seen["chunks"]}
        triples = {t.chunk_id for t in watch.seen["triples"]}
        entities = sum(1 for e in watch.seen["entities"] if e.entities)
        now = (len(triples), watch.count("entity-vectors"))
        if now != last:
            last, quiet_since = now, time.monotonic()
        if chunks <= triples and now[1] >= entities and time.monotonic() - quiet_since > 2:
            return


@dataclass
class Result:
    ranks: list[int | None] = field(default_factory=list)  # of the right document
    seconds: list[float] = field(default_factory=list)  # to the metadata line
    rankings: list[list[str]] = field(default_factory=list)  # chunk ids, for fusion


async def ask(session: aiohttp.ClientSession, url: str, item: Item, mode: str
              ) -> tuple[list[dict], float]:
    body = {"query": item.question, "stream": True, "user": USER, "collection": COLLECTION,
            **MODES[mode]}
    if mode != "graph":
        body["doc_limit"] = DEPTH
    started = time.perf_counter()
    async with session.post(f"{url}api/v1/query", json=body) as response:
        line = json.loads(await response.content.readline())
        elapsed = time.perf_counter() - started
    if line.get("type") != "metadata":
        raise SystemExit(f"{mode}: {line}")
    return line["sources"], elapsed


def cited(sources: list[dict]) -> list[str]:
    """The documents cited, each once, in the order first cited."""
    return list(dict.fromkeys(s.get("document_id") for s in sources if s.get("document_id")))


def rank_of(documents: list[str], wanted: str) -> int | None:
    return documents.index(wanted) + 1 if wanted in documents[:DEPTH] else None


async def measure(url: str, items: list[Item]) -> dict[str, Result]:
    results = {mode: Result() for mode in MODES}
    async with aiohttp.ClientSession() as session:
        for mode in MODES:  # warm-up: the model, the requesters, the stores
            await ask(session, url, items[0], mode)
        for item in items:
            for mode, result in results.items():
                sources, seconds = await ask(session, url, item, mode)
                result.ranks.append(rank_of(cited(sources), item.id))
                result.seconds.append(seconds)
                result.rankings.append([s["id"] for s in sources])
    return results


def scores(ranks: list[int | None]) -> tuple[float, float, float, float]:
    n = len(ranks)
    recall = [sum(1 for r in ranks if r is not None and r <= k) / n for k in (1, 5, 10)]
    return (*recall, sum(1 / r for r in ranks if r is not None) / n)


def table(results: dict[str, Result]) -> str:
    lines = ["| retrieval | questions | R@1 | R@5 | R@10 | MRR@10 | time to metadata p50 ms |"
             " p95 ms |", "|---|---|---|---|---|---|---|---|"]
    for mode, result in results.items():
        r1, r5, r10, mrr = scores(result.ranks)
        seconds = sorted(result.seconds)
        p95 = seconds[min(len(seconds) - 1, int(len(seconds) * 0.95))]
        name = "graph (by cited document)" if mode == "graph" else mode
        lines.append(f"| {name} | {len(result.ranks)} | {r1:.3f} | {r5:.3f} | {r10:.3f} | "
                     f"{mrr:.3f} | {statistics.median(seconds) * 1000:.1f} | "
                     f"{p95 * 1000:.1f} |")
    return "\n".join(lines)


def fusion_table(results: dict[str, Result], items: list[Item]) -> str:
    """Hybrid R@1/R@5/MRR for other k and weights, fusing the vector and lexical
    chunk rankings the API returned (chunk ids are ``<document>/c<n>``)."""
    lines = ["| k | vector weight | lexical weight | R@1 | R@5 | MRR@10 |", "|---|---|---|---|---|---|"]
    for k in (10, 30, 60, 100):
        for weights in ((1.0, 1.0), (1.0, 0.5), (0.5, 1.0)):
            ranks = []
            for n, item in enumerate(items):
                fused = fuse([Ranking("vector", results["vector"].rankings[n]),
                              Ranking("lexical", results["lexical"].rankings[n])],
                             key=lambda chunk: chunk, score=lambda chunk: 0.0, k=k,
                             weights={"vector": weights[0], "lexical": weights[1]})
                documents = list(dict.fromkeys(e.item.rsplit("/c", 1)[0] for e in fused))
                ranks.append(rank_of(documents, item.id))
            r1, r5, _, mrr = scores(ranks)
            lines.append(f"| {k} | {weights[0]} | {weights[1]} | {r1:.3f} | {r5:.3f} | "
                         f"{mrr:.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=0, help="at most (0: all)")
    parser.add_argument("--no-embed-title", action="store_true",
                        help="run the stack with TG_EMBED_TITLE=false (default: true)")
    args = parser.parse_args()
    items = corpus(args.documents)
    env = {"TG_LOG_LEVEL": "WARNING", "TG_LLM": "openai"}
    if args.no_embed_title:
        env["TG_EMBED_TITLE"] = "false"
    with openai_server_thread() as llm:
        env["OPENAI_BASE_URL"] = llm.base_url
        with Stack(env=env, startup_timeout=120.0) as stack:
            asyncio.run(load(stack, items))
            results = asyncio.run(measure(stack.gateway_url, items))
    print(f"\nPython {sys.version.split()[0]} standard-library docstrings: {len(items)} "
          f"documents, one question each (its summary line); TG_EMBED_TITLE="
          f"{'false' if args.no_embed_title else 'true'}; one question at a time; "
          f"2-core machine\n")
    print(table(results))
    print("\nFusion settings compared offline on the same vector and lexical rankings:\n")
    print(fusion_table(results, items))


if __name__ == "__main__":
    main()
