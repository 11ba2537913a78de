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
mode); the LLM is a scripted local server. The questions are asked and scored by
tg-eval's own runner (``trustgraph.cli.eval_run``), one setting after another:
vector, lexical, hybrid, hybrid with reranking (the scripted LLM answers the rerank
prompt with the order it was given, after ``--rerank-latency`` seconds: what
reranking costs, not what it buys) and graph mode. ``--questions FILE`` writes the
question file and ``--load URL`` loads the corpus into a running stack, so the same
set can be run with ``tg-eval`` by hand (docs/evaluation.md).
"""
import argparse
import asyncio
import importlib
import inspect
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.ingest import StageWatch
from tests.support.openai_server import Script
from tests.support.stack import Stack, openai_server_thread
from trustgraph.api import AsyncTrustGraph
from trustgraph.cli.eval_convert import Question, line_of
from trustgraph.cli.eval_run import run_setting, summary
from trustgraph.cli.evaluate import table, write

USER, COLLECTION = "bench", "stdlib"
DEPTH = 10  # sources asked for, and the deepest rank scored
SKIPPED = {"antigravity", "this", "idlelib", "turtledemo", "tkinter", "turtle", "test",
           "lib2to3", "ensurepip", "venv"}


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
    await load_into(stack.gateway_url, items, user, collection)
    await wait_extracted(watch)
    await watch.close()
    print(f"loaded {len(items)} documents ({watch.count('chunks')} chunks), extracted in "
          f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)


async def load_into(url: str, items: list[Item], user: str = USER,
                    collection: str = COLLECTION) -> None:
    """Every document loaded through the gateway at ``url``; returns once every chunk
    is stored (extraction may go on)."""
    started = time.perf_counter()
    async with AsyncTrustGraph(url) as client:
        slots = asyncio.Semaphore(8)

        async def one(item: Item) -> None:
            async with slots:
                await client.load_text(item.text, item.id,
                                       title=getattr(item, "title", item.id), user=user,
                                       collection=collection)
        await asyncio.gather(*(one(item) for item in items))
        await wait_stored(client, {item.id for item in items}, user, collection)
    print(f"stored {len(items)} documents in {time.perf_counter() - started:.0f} s",
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


# tg-eval settings: the query body's fields beyond the question (docs/evaluation.md).
SETTINGS = {
    "vector": {"mode": "document", "retrieval": "vector", "doc_limit": DEPTH},
    "lexical": {"mode": "document", "retrieval": "lexical", "doc_limit": DEPTH},
    "hybrid": {"mode": "document", "retrieval": "hybrid", "doc_limit": DEPTH},
    "hybrid+rerank": {"mode": "document", "retrieval": "hybrid", "doc_limit": DEPTH,
                      "rerank": True},
    "graph": {"mode": "graph"},
}


def question_lines(items: list[Item]) -> list[str]:
    """The corpus as a tg-eval question file: each summary line expects its docstring."""
    return [line_of(item.question, [item.id], id=item.id) for item in items]


async def measure(url: str, items: list[Item], names: list[str]) -> list[dict]:
    """Every question through tg-eval's runner, one setting after another, one
    question at a time (the times are not each other's queueing)."""
    questions = [Question(item.id, item.question, (item.id,)) for item in items]
    runs = []
    for name in names:
        body = {**SETTINGS[name], "user": USER, "collection": COLLECTION}
        await run_setting(url, None, questions[:1], body, 1, False, lambda: None)  # warm-up
        scores = await run_setting(url, None, questions, body, 1, False, lambda: None)
        runs.append({"setting": name, "body": body, "summary": summary(scores),
                     "questions": scores})
        print(f"{name}: done", file=sys.stderr, flush=True)
    return runs


def ranking_answer(text: str) -> str | None:
    """The scripted LLM's answer to the rerank prompt: the passages in the order given
    (so reranking costs its LLM round trip and changes nothing); other prompts get the
    scripted default."""
    if "Rank the passages" not in text:
        return None
    return json.dumps(sorted({int(n) for n in re.findall(r"^\[(\d+)\]", text, re.M)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=0, help="at most (0: all)")
    parser.add_argument("--no-embed-title", action="store_true",
                        help="run the stack with TG_EMBED_TITLE=false (default: true)")
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS),
                        default=list(SETTINGS), help="which to run (default: all)")
    parser.add_argument("--rerank-latency", type=float, default=0.0, metavar="SECONDS",
                        help="the scripted LLM's time to answer (a real model's TTFT)")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="stack settings over the bench's (e.g. TG_LLM=local, or "
                             "OPENAI_BASE_URL=http://127.0.0.1:8080/v1 for a real "
                             "model: then reranking is measured for what it buys)")
    parser.add_argument("-n", "--questions-limit", type=int, default=0,
                        help="ask only the first N questions (all documents are loaded)")
    parser.add_argument("--out", help="also write tg-eval's PREFIX.json and PREFIX.md")
    parser.add_argument("--questions", metavar="FILE",
                        help="only write the corpus's tg-eval question file, and stop")
    parser.add_argument("--load", metavar="URL",
                        help="only load the corpus into the stack at URL, and stop")
    args = parser.parse_args()
    items = corpus(args.documents)
    if args.questions:
        Path(args.questions).write_text("\n".join(question_lines(items)) + "\n")
        print(f"{len(items)} questions written to {args.questions}", file=sys.stderr)
        return
    if args.load:
        asyncio.run(load_into(args.load, items))
        return
    env = {"TG_LOG_LEVEL": "WARNING", "TG_LLM": "openai"}
    if args.no_embed_title:
        env["TG_EMBED_TITLE"] = "false"
    with openai_server_thread(Script(first=args.rerank_latency)) as llm:
        llm.reply = ranking_answer
        env["OPENAI_BASE_URL"] = llm.base_url
        env |= dict(pair.split("=", 1) for pair in args.env)
        with Stack(env=env, startup_timeout=120.0) as stack:
            asyncio.run(load(stack, items))
            asked = items[:args.questions_limit] if args.questions_limit else items
            runs = asyncio.run(measure(stack.gateway_url, asked, args.settings))
    scripted = f"scripted (rerank answers in {args.rerank_latency:g} s)"
    text = (f"Python {sys.version.split()[0]} standard-library docstrings: {len(items)} "
            f"documents, one question each (its summary line); TG_EMBED_TITLE="
            f"{'false' if args.no_embed_title else 'true'}; one question at a time; "
            f"LLM: {' '.join(args.env) or scripted}\n\n{table(runs)}")
    print(text)
    if args.out:
        write(Path(args.out), runs, text)


if __name__ == "__main__":
    main()
