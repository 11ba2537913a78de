"""Replicas share the work, and a replica that dies loses nothing and doubles nothing.

``tg-start --replicas text-completion=2,document-rag=2`` runs two processes of each
on one pulsar-lite broker (each skipping its own number of consumer ids, which
pulsar-lite needs: trustgraph/run/replicas.py). Through the gateway's websocket:

* a burst is served by both replicas (each one's log lines name it: ``document-rag``
  and ``document-rag.1``; every request served logs ``id=… <service> done`` at DEBUG);
* SIGKILL one replica while both stream answers: every request ends, none hangs; one
  served by the dead replica ends in a clear error (its requester hears nothing for
  its liveness, 10 s) and one served by the survivor ends whole; none is answered
  twice (a second answer would interleave with the first: the text would not be the
  LLM's exactly, or the sequence numbers would clash into ``responses-lost``).

Pipeline records: a second decoder joins the running ingestion stack as a replica
started elsewhere would (``tg-run decoder`` with ``TG_REPLICA=1``). It is stuck: with
``TG_CONCURRENCY=0`` it takes the documents the broker hands it (its prefetch) and
never settles them, as a replica whose handlers hang would; then it is SIGKILLed. The
broker redelivers them to the stack's own decoder (the only one left: this one is not
restarted), which logs each as delivered again, and the stores hold every chunk,
triple and entity exactly once.

(Not SIGSTOP: a stopped process cannot read what the broker keeps sending it, and
closing a socket with unread data resets it, which pulsar-lite 0.2.0 answers by
keeping the dead consumer and its records until it restarts; under tg-start the
killed replica's restart is refused for that and tg-start restarts the broker,
``run/broker_watch.py``; docs/operations.md.)
"""
import asyncio
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio

from tests.support.ingest import check_graph_stored, expected, prose
from tests.support.openai_server import expected_text
from tests.support.stack import Stack, openai_server_thread
from tests.support.waiting import eventually, eventually_blocking
from trustgraph.api import AsyncTrustGraph
from trustgraph.decoding import PLAIN
from trustgraph.schema import DocumentMetadata

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300)]

PROCESSORS = ["config", "text-completion", "embeddings", "vector-store", "prompt", "document-rag",
              "gateway"]
REPLICATED = ("text-completion", "document-rag")
SCOPE = {"user": "rhea", "collection": "replicas"}
TG_RUN = str(Path(sys.executable).with_name("tg-run"))


@pytest.fixture(scope="module")
def llm():
    with openai_server_thread() as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(llm):
    async with Stack(processors=PROCESSORS, startup_timeout=120, env={
            "OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "test",
            "TG_REPLICAS": ",".join(f"{name}=2" for name in REPLICATED),
            "TG_LOG_LEVEL": "DEBUG"}) as stack:
        yield stack


def request(service: str, tokens: int, delay: float) -> dict:
    directive = f"[tokens={tokens} delay={delay}]"
    if service == "text-completion":
        return {"system": "", "prompt": directive, "streaming": True}
    return {"query": f"What is there? {directive}", "streaming": True, **SCOPE}


def delta(service: str, frame: dict) -> str:
    response = frame.get("response") or {}
    return response.get("response" if service == "text-completion" else "chunk") or ""


async def ask(stack: Stack, service: str, tokens: int, delay: float,
              streaming: asyncio.Event | None = None) -> tuple[str, dict | None, int]:
    """One streamed request over its own websocket, read until its final frame (and
    for a moment after it): (text, error or None, final frames seen)."""
    request_id = uuid.uuid4().hex
    text, error, finals = [], None, 0
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(stack.websocket_url) as ws:
            await ws.send_json({"id": request_id, "service": service, "flow": "default",
                                "request": request(service, tokens, delay)})
            while True:
                try:
                    frame = await ws.receive_json(timeout=0.5 if finals else 60)
                except TimeoutError:
                    assert finals, f"{service} request {request_id} hung"
                    return "".join(text), error, finals
                assert frame["id"] == request_id
                text.append(delta(service, frame))
                if text[-1] and streaming is not None:
                    streaming.set()
                error = error or frame.get("error") or (frame.get("response") or {}).get("error")
                finals += frame["complete"]


def served(log: str, service: str) -> dict[str, int]:
    """Requests each process of ``service`` logged as done, by its log name."""
    pattern = re.compile(rf" ({re.escape(service)}(?:\.\d+)?) DEBUG \S+: id=\S+ "
                         rf"{re.escape(service)} done in")
    counts: dict[str, int] = {}
    for name in pattern.findall(log):
        counts[name] = counts.get(name, 0) + 1
    return counts


@pytest.mark.parametrize("service", REPLICATED)
async def test_both_replicas_serve_part_of_a_burst(stack, service):
    before = served(stack.log(), service)
    results = await asyncio.gather(*(ask(stack, service, 20, 0.01) for _ in range(24)))
    assert all(result == (expected_text(20), None, 1) for result in results)
    after = served(stack.log(), service)
    shares = {name: after.get(name, 0) - before.get(name, 0) for name in after}
    print(f"{service}: requests served by each replica: {shares}")
    assert sum(shares.values()) == 24
    assert shares.get(service, 0) > 0 and shares.get(f"{service}.1", 0) > 0


@pytest.mark.parametrize("service", REPLICATED)
async def test_a_replica_killed_mid_stream_leaves_no_request_hanging_or_answered_twice(
        stack, service):
    tokens, delay = 60, 0.1  # 6 s of answer each
    streaming = [asyncio.Event() for _ in range(8)]
    asking = [asyncio.create_task(ask(stack, service, tokens, delay, event))
              for event in streaming]
    await asyncio.wait_for(asyncio.gather(*(event.wait() for event in streaming)), 30)
    killed = stack.kill(f"{service}.1")
    results = await asyncio.wait_for(asyncio.gather(*asking), 60)
    whole = [text for text, error, _ in results if error is None]
    failed = [error for _, error, _ in results if error is not None]
    print(f"{service}: {len(whole)} answered whole, {len(failed)} failed: "
          f"{[e['message'] for e in failed][:1]}")
    assert all(finals == 1 for _, _, finals in results)
    assert whole and all(text == expected_text(tokens) for text in whole)
    assert failed, "the killed replica had none of the requests"
    assert all(error["type"] and error["message"] for error in failed)
    # The survivor (and the restarted replica) serve what comes next.
    await asyncio.to_thread(stack.wait_restarted, f"{service}.1", killed, 60)
    after = await asyncio.gather(*(ask(stack, service, 5, 0) for _ in range(4)))
    assert all(result == (expected_text(5), None, 1) for result in after)


# --- pipeline records ------------------------------------------------------------------

INGEST_SCOPE = {"user": "rhea", "collection": "redelivered"}
DOCUMENTS = 24


@pytest.fixture
def second_decoder(ingestion_stack, tmp_path):
    """``tg-run decoder`` as a replica elsewhere would run, subscribed and stuck."""
    ready = tmp_path / "decoder.1.ready"
    env = dict(ingestion_stack.env, PULSAR_URL=ingestion_stack.broker_url,
               TG_REPLICA="1", TG_READY_FILE=str(ready), TG_CONCURRENCY="0")
    env.pop("TG_SUPERVISOR_PID", None)
    with open(tmp_path / "decoder.1.log", "wb") as log:
        process = subprocess.Popen([TG_RUN, "decoder"], env=env, stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        eventually_blocking(ready.exists, "the second decoder to subscribe", timeout=60)
        yield process
    finally:
        process.kill()
        process.wait()


async def test_a_dead_replicas_pipeline_records_go_to_the_survivor_and_are_stored_once(
        ingestion_stack, second_decoder):
    stack = ingestion_stack
    texts = prose(DOCUMENTS, sizes=(1500, 2200, 900))
    documents = [(DocumentMetadata(id=f"r-{n:02}.txt", title=f"r-{n:02}.txt", kind=PLAIN,
                                   **INGEST_SCOPE), text.encode())
                 for n, text in enumerate(texts)]
    want = await asyncio.to_thread(expected, documents)
    ids = [d.id for d, _ in documents]
    redelivered = stack.log().count("decode: message")
    async with AsyncTrustGraph(stack.gateway_url) as client:
        await asyncio.gather(*(client.load_text(content.decode(), d.id, title=d.title,
                                                **INGEST_SCOPE) for d, content in documents))

        async def states() -> dict[str, str]:
            return {s["id"]: s["state"] for s in await client.load_status(ids, **INGEST_SCOPE)}

        # The stuck replica holds its share, unsettled, for as long as it lives.
        await eventually(lambda: _some_done(states), "the survivor to decode", timeout=60)
        os.kill(second_decoder.pid, signal.SIGKILL)

        async def all_done() -> bool:
            return set((await states()).values()) == {"done"}
        await eventually(all_done, "every document, its held ones redelivered", timeout=120)
        log = stack.log()
        assert log.count("decode: message") > redelivered
        assert re.search(r" decoder INFO \S+: decode: message \S+ delivered again "
                         r"\(delivery 2\)", log)

        statuses = await client.load_status(ids, **INGEST_SCOPE)
        assert {s["id"]: s["stored"] for s in statuses} == dict(want.per_document)
        [probe] = await client.embeddings(["anything"])
        found = await client.document_embeddings(probe, limit=1000, **INGEST_SCOPE)
        assert len(found) == len(want.chunks)
        assert {c["chunk_id"]: c["text"] for c in found} == {
            id: chunk.text for id, chunk in want.chunks.items()}
        await check_graph_stored(client, want, stack.data_dir, INGEST_SCOPE["user"],
                                 INGEST_SCOPE["collection"], probe, 120)


async def _some_done(states) -> bool:
    return "done" in (await states()).values()
