"""``make bench`` (LazyRAG part): what lazy-rag adds on top of the LLM at 100k triples
/ 20k entities, the cold community computation, and whether that computation stalls
other requests.

The stores are filled before ``tg-start`` opens them: 20k labelled entities named by
extraction's rule (so questions naming one match it exactly), 80k random edges
between them over 20 predicates, each with a chunk and document as provenance, and
20k entity vectors (random unit vectors: search costs the same as with real ones;
the question is still embedded by the real model).

A scripted OpenAI-format server (its own process) is the LLM, answering at a
realistic pace (first token after 300 ms, then 50 tokens/s). Questions go one at a
time over the gateway websocket:

* cold: a ``lazy-rag-expand`` request wanting communities computes them (the
  ``lazy-rag-status`` compute time is quoted); meanwhile graph-rag questions are asked
  back to back, each cancelled at its first token (so that many fit in one
  computation), and their added TTFT is compared with the same kind of questions
  asked when nothing is being computed; those asked while the computation itself ran
  (by its start and duration in ``lazy-rag-status``), not the expand request's own
  retrieval around it, are also counted apart. A one-triple ``knowledge-load`` then changes
  the graph's version and the next expand computes them again, until at least
  ``--min-during`` questions were asked while computations ran, and as many outside;
* warm: with communities cached, time to metadata (request → sources frame), added
  TTFT (first answer token minus the LLM's own TTFT, measured straight), and the
  whole answer, against the seed's < 3 s for < 50 entities.
"""
import argparse
import asyncio
import itertools
import json
import random
import sys
import time
from pathlib import Path

import aiohttp
import numpy as np

from bench import clients
from bench.stats import median, ms, percentile
from bench.streaming import llm_server
from tests.support.stack import Stack
from trustgraph.extract.vocabulary import entity_iri
from trustgraph.schema import RDFS_LABEL, Term, Triple
from trustgraph.storage.settings import StoreSettings
from trustgraph.storage.triples.configured import open_triples_store
from trustgraph.storage.vectors.configured import open_vector_store
from trustgraph.storage.vectors.store import EntityVector

USER, COLLECTION = "bench", "default"
DIMENSION = 384
MAX_ENTITIES = 45  # the seed's "typical query": fewer than 50 entities
# graph-rag answers the same questions alongside: the same retrieval chain (embed,
# search, expand) without LazyRAG's part, for comparison.
PROCESSORS = ["config", "prompt+text-completion+lazy-rag+graph-rag", "embeddings",
              "triples-store", "vector-store", "gateway"]
OUTSIDE_PER_COMPUTATION = 4  # questions asked with nothing computing, per computation
MAX_COMPUTATIONS = 20
_ids = itertools.count()


def graph(triples: int, rng: random.Random) -> tuple[list[Triple], list[Term]]:
    entities = [Term.iri(entity_iri(f"entity {n}")) for n in range(triples // 5)]
    label, predicates = Term.iri(RDFS_LABEL), [Term.iri(f"urn:tg:rel:p{n}") for n in range(20)]
    found = [Triple(s=e, p=label, o=Term.literal(f"entity {n}"))
             for n, e in enumerate(entities)]
    while len(found) < triples:
        found.append(Triple(s=rng.choice(entities), p=rng.choice(predicates),
                            o=rng.choice(entities)))
    return found, entities


async def fill_stores(data_dir: Path, triples: int) -> int:
    settings = StoreSettings(tg_data_dir=str(data_dir))
    rng, np_rng = random.Random(7), np.random.default_rng(7)
    statements, entities = graph(triples, rng)
    vectors = open_vector_store(settings)
    for start in range(0, len(entities), 1000):
        batch = entities[start:start + 1000]
        embedded = np_rng.standard_normal((len(batch), DIMENSION)).astype(np.float32)
        embedded /= np.linalg.norm(embedded, axis=1, keepdims=True)
        await vectors.upsert_entities(USER, COLLECTION, [
            EntityVector(entity=e, vector=embedded[n].tolist(), label=f"entity {start + n}",
                         document=f"doc-{(start + n) // 100}") for n, e in enumerate(batch)])
    await vectors.close()
    store = await open_triples_store(settings)
    for index, start in enumerate(range(0, len(statements), 10)):
        await store.add(USER, COLLECTION, statements[start:start + 10],
                        document=f"doc-{index // 10}", chunk=f"doc-{index // 10}/c{index % 10}")
    await store.close()
    return len(entities)


class Socket:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.waiting: dict[str, asyncio.Queue] = {}
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self.ws:
            frame = json.loads(message.data)
            queue = self.waiting.get(frame["id"])
            if queue is not None:  # else: a request cancelled with frames in flight
                await queue.put((time.perf_counter(), frame))

    async def ask(self, service: str, request: dict, until_first: bool = False
                  ) -> tuple[float, float | None, float, dict]:
        """(time to metadata, to first token, total, final response) of one request;
        ``until_first``: cancelled at its first token (total: that time, response:
        that frame's)."""
        request_id = f"r{next(_ids)}"
        self.waiting[request_id] = queue = asyncio.Queue()
        started = time.perf_counter()
        metadata = first = None
        await self.ws.send_str(json.dumps({"id": request_id, "service": service, "request": {
            "user": USER, "collection": COLLECTION, **request}}))
        while True:
            now, frame = await queue.get()
            response = frame.get("response") or {}
            if "error" in frame or "error" in response:
                raise RuntimeError(f"{service}: {frame}")
            if metadata is None and response.get("message_type") == "metadata":
                metadata = now - started
            if first is None and response.get("chunk"):
                first = now - started
                if until_first:
                    del self.waiting[request_id]
                    await self.ws.send_str(json.dumps({"type": "cancel", "id": request_id}))
                    return metadata or 0.0, first, first, response
            if frame["complete"]:
                del self.waiting[request_id]
                return metadata or 0.0, first, now - started, response


def question(rng: random.Random, entities: int) -> str:
    a, b = rng.sample(range(entities), 2)
    return f"How is entity {a} related to entity {b}?"


async def lazy(socket: Socket, text: str, communities: bool) -> tuple:
    return await socket.ask("lazy-rag", {"query": text, "streaming": True,
                                         "max_entities": MAX_ENTITIES,
                                         "use_communities": communities})


async def graph_rag(socket: Socket, text: str, until_first: bool = False) -> tuple:
    return await socket.ask("graph-rag", {"query": text, "streaming": True,
                                          "entity_limit": MAX_ENTITIES}, until_first)


async def cold(socket: Socket, rng: random.Random, entities: int, found: dict) -> None:
    """One community computation, graph-rag questions asked meanwhile, and as many
    asked with nothing computing just before it."""
    for _ in range(OUTSIDE_PER_COMPUTATION):
        found["outside"].append(await graph_rag(socket, question(rng, entities), True))
    computing = asyncio.create_task(socket.ask("lazy-rag-expand", {
        "query": question(rng, entities), "max_entities": MAX_ENTITIES,
        "use_communities": True}))
    during = []  # (when it was asked, unix time; the question's times)
    while not computing.done():  # started during the computation (it may end first)
        asked = time.time()
        during.append((asked, await graph_rag(socket, question(rng, entities), True)))
    found["cold"].append(await computing)
    status = (await socket.ask("lazy-rag-status", {}))[3]
    [state] = [s for s in status["community_cache"] if s["collection"] == COLLECTION]
    found["computations"].append(state)
    # The expand request also does its own retrieval before and after the computation
    # (seeds, hops); the questions asked while the computation itself ran (reading the
    # graph's pages, then Leiden) are counted apart as well.
    ends = state["computed_at"]
    begins = ends - state["compute_seconds"]
    found["during"] += [sample for _, sample in during]
    found["computing"] += [sample for asked, sample in during if begins <= asked <= ends]


async def new_version(socket: Socket, n: int) -> None:
    """One new triple: the graph's version moves on, so the cached communities are
    stale and the next question wanting them computes them again."""
    await socket.ask("knowledge-load", {"source": f"bench-version-{n}", "triples": [
        {"s": {"t": "i", "i": entity_iri("entity 0")}, "p": {"t": "i", "i": "urn:tg:rel:p0"},
         "o": {"t": "i", "i": f"urn:bench:new:{n}"}}]})


async def measure(gateway: str, llm_url: str, entities: int, rounds: int,
                  min_during: int) -> dict:
    rng = random.Random(3)
    found: dict = {"direct": [], "outside": [], "during": [], "computing": [], "cold": [],
                   "computations": [], "warm": [], "graph-rag": []}
    async with aiohttp.ClientSession() as session:
        socket = Socket(await session.ws_connect(
            f"{gateway.replace('http', 'ws', 1)}api/v1/socket", max_msg_size=0))
        await lazy(socket, question(rng, entities), False)  # warm-up: model, requesters
        await graph_rag(socket, question(rng, entities))
        for _ in range(rounds // 2):
            found["direct"].append(await clients.direct(session, llm_url))
        while min(len(found["computing"]), len(found["outside"])) < min_during and \
                len(found["computations"]) < MAX_COMPUTATIONS:
            if found["computations"]:
                await new_version(socket, len(found["computations"]))
            await cold(socket, rng, entities, found)
        for _ in range(rounds):
            text = question(rng, entities)
            found["warm"].append(await lazy(socket, text, True))
            found["graph-rag"].append(await graph_rag(socket, text))
        socket.reader.cancel()
    return found


def report(found: dict) -> str:
    llm_first = median([first for first, _ in found["direct"]])
    llm_total = median([total for _, total in found["direct"]])
    warm = found["warm"]
    cache = [r[3].get("community_cache") for r in warm]

    def added(samples: list) -> list[float]:
        return [first - llm_first for _, first, _, _ in samples]

    seconds = [state["compute_seconds"] for state in found["computations"]]
    state = found["computations"][-1]
    lines = [
        f"LLM straight: TTFT p50 {ms(llm_first)} ms, whole answer p50 {ms(llm_total)} ms",
        f"cold community computation ({len(seconds)} runs, each after the graph changed): "
        f"{', '.join(f'{s:.2f}' for s in seconds)} s for {state['entities']} entities "
        f"({state['communities']} communities, {state['levels']} levels); the "
        f"lazy-rag-expand request wanting them took p50 "
        f"{ms(median([total for _, _, total, _ in found['cold']]))} ms end to end",
        "",
        "| graph-rag questions (cancelled at the first token) | questions | added TTFT "
        "p50 ms | p95 ms |",
        "|---|---|---|---|",
        *(f"| {name} | {len(found[key])} | {ms(median(added(found[key])))} | "
          f"{ms(percentile(added(found[key]), 95))} |"
          for name, key in (("nothing computing", "outside"),
                            ("during a lazy-rag-expand request that computes communities",
                             "during"),
                            ("of those, asked while the computation itself ran",
                             "computing")) if found[key]),
        "",
        "| service | questions | time to metadata p50 ms | p95 ms | added TTFT "
        "p50 ms | p95 ms | end to end p50 ms | p95 ms |",
        "|---|---|---|---|---|---|---|---|",
        _row(f"lazy-rag, communities cached ({cache.count('hit')}/{len(cache)} hits, "
             f"≤ {max(len(r[3].get('entities') or []) for r in warm)} entities)",
             warm, added(warm)),
        _row("graph-rag, same questions", found["graph-rag"], added(found["graph-rag"])),
    ]
    return "\n".join(lines)


def _row(name: str, samples: list, added: list[float]) -> str:
    metadata, total = [m for m, _, _, _ in samples], [t for _, _, t, _ in samples]
    return (f"| {name} | {len(samples)} | {ms(median(metadata))} | "
            f"{ms(percentile(metadata, 95))} | {ms(median(added))} | "
            f"{ms(percentile(added, 95))} | {ms(median(total))} | "
            f"{ms(percentile(total, 95))} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--triples", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=60)
    parser.add_argument("--min-during", type=int, default=30,
                        help="questions to ask during community computations (and "
                             "as many with nothing computing)")
    args = parser.parse_args()
    with llm_server(args.tokens, 0.3, 0.02) as url:
        stack = Stack(env={"OPENAI_BASE_URL": f"{url}/v1", "TG_LLM": "openai",
                           "TG_LOG_LEVEL": "WARNING", "LAZY_RAG_ENABLED": "true"},
                      processors=PROCESSORS, startup_timeout=120.0)
        started = time.perf_counter()
        entities = asyncio.run(fill_stores(stack.data_dir, args.triples))
        print(f"stores filled in {time.perf_counter() - started:.0f} s", file=sys.stderr,
              flush=True)
        with stack:
            found = asyncio.run(measure(stack.gateway_url, url, entities, args.rounds,
                                        args.min_during))
    print(f"\nlazy-rag at {args.triples} triples / {entities} entities; one question at a "
          f"time (max_entities {MAX_ENTITIES}, 2 hops); LLM first token after 300 ms then "
          f"every 20 ms ({args.tokens} tokens); 2-core machine\n")
    print(report(found))


if __name__ == "__main__":
    main()
