"""One trace per question and per loaded document, end to end (issue 34): ``tg-start``
running its default stack, traced with nothing configured but an OTLP endpoint,
which is a real receiver started here (Arize Phoenix, tests/support/phoenix.py).

* one loaded document is one trace through every pipeline stage (decode, the
  chunks' embedding and extraction, the stores), each stage's span a child of the
  span that sent its record;
* one graph-rag question over the websocket is one trace whose spans cover every
  process it crossed (the gateway, the answering group, embeddings, both stores),
  parented across the broker (a service's span under its caller's call span, in
  another process), with time to sources and to the first token on the gateway's
  and graph-rag's spans, and GenAI / OpenInference attributes on the LLM's;
* both traces arrive at Phoenix whole, with the same spans and parents as the
  store in the data dir keeps, and read back through its REST API;
* each request continues the trace its frame's ``traceparent`` names, as a
  tracing client's does (so the stack's default sampling keeps it);
* ``tg-show-trace`` prints the question's trace as a tree; ``tg-list-explain-traces``
  and ``tg-show-explain-trace`` say why the answer cited what it cited.
"""
import asyncio
import subprocess
import sys
import uuid
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio

from tests.support.openai_server import expected_text
from tests.support.phoenix import Phoenix
from tests.support.stack import Stack, openai_server_thread
from tests.support.waiting import eventually
from trustgraph.api import AsyncTrustGraph, TrustGraphError

# A fresh clone's first run makes Phoenix's venv (uv), creates its database and starts
# a stack, all in the first test's setup: the sum of their deadlines, not the default.
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(420)]

BIN = Path(sys.executable).parent
DEADLINE = 120.0  # the pipeline on a busy machine; spans arrive within a second of it
PROJECT = f"tg-e2e-{uuid.uuid4().hex[:8]}"  # Phoenix's project: these spans only
CLIENT_SPAN = "00f067aa0ba902b7"  # the span of this test's, as a client, each request continues
TEXT = ("The Apollo lunar module Eagle landed in the Sea of Tranquility. Neil Armstrong "
        "and Buzz Aldrin walked on the Moon while Michael Collins orbited in Columbia.")
# Each pipeline stage's span (the stage it consumes) and the processor serving it.
STAGES = {("decode", "decoder"), ("chunks", "chunk-embeddings"), ("chunks", "extract"),
          ("chunk-vectors", "vector-store"), ("triples", "triples-store"),
          ("entities", "entity-embeddings"), ("entity-vectors", "vector-store")}
# The services a graph question crosses, and the processes serving them.
SERVICES = {"graph-rag", "prompt", "text-completion", "embeddings", "graph-embeddings",
            "document-embeddings", "lexical-search", "subgraph"}


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    receiver = Phoenix(tmp_path_factory.mktemp("phoenix")).start()  # starts with the stack
    try:
        yield receiver
    finally:
        receiver.stop()


@pytest.fixture(scope="module")
def llm():
    with openai_server_thread() as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(llm, phoenix):
    async with Stack(env={"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "test",
                          "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.otlp_endpoint,
                          "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={PROJECT}"},
                     startup_timeout=180) as stack:
        await asyncio.to_thread(phoenix.wait_ready)
        yield stack


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(stack):
    async with AsyncTrustGraph(stack.gateway_url) as client:
        yield client


async def frames_of(stack: Stack, service: str, request: dict) -> list[dict]:
    """The frames of one request that asks for its trace, as a tracing client's
    would: the stack traces only a share of the others (TG_TRACE_SAMPLE)."""
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(stack.websocket_url) as ws:
            await ws.send_json({"id": "e2e", "service": service, "request": request,
                                "traceparent": f"00-{uuid.uuid4().hex}-{CLIENT_SPAN}-01"})
            frames: list[dict] = []
            async with asyncio.timeout(DEADLINE):
                while not frames or not frames[-1]["complete"]:
                    frames.append(await ws.receive_json())
    return frames


async def kept(client: AsyncTrustGraph, trace_id: str, holds) -> dict:
    """The trace as the gateway serves it, once ``holds(its spans)`` and it is whole:
    each process writes its own spans, each within a second of their end."""
    async def found() -> dict | None:
        try:
            trace = await client.trace(trace_id)
        except TrustGraphError:  # nothing of it written yet
            return None
        spans = trace["spans"]
        ids = {span["span_id"] for span in spans}
        whole = any(s["parent_id"] is None for s in spans) and \
            all(s["parent_id"] is None or s["parent_id"] in ids for s in spans)
        return trace if whole and holds(spans) else None
    return await eventually(found, f"trace {trace_id} complete", timeout=DEADLINE)


async def at_phoenix(phoenix: Phoenix, trace: dict) -> list[dict]:
    """The trace's spans as Phoenix has them, once every one has arrived."""
    ours = {span["span_id"] for span in trace["spans"]}

    async def arrived() -> list[dict] | None:
        spans = await phoenix.spans(PROJECT, trace["trace_id"])
        return spans if {s["context"]["span_id"] for s in spans} >= ours else None
    return await eventually(arrived, "the trace at Phoenix", timeout=DEADLINE)


def assert_same_tree(trace: dict, received: list[dict]) -> None:
    """The same spans and parents at Phoenix as kept here, but the root's: Phoenix has
    it under the client's span, whose trace it continued; the store (this platform's
    spans only) as the root."""
    parents = {s["context"]["span_id"]: s["parent_id"] for s in received}
    assert all(s["context"]["trace_id"] == trace["trace_id"] for s in received)
    ours = {span["span_id"]: span["parent_id"] for span in trace["spans"]}
    theirs = {span_id: parents[span_id] for span_id in ours}
    [root] = [span_id for span_id, parent in ours.items() if parent is None]
    assert theirs.pop(root) == CLIENT_SPAN and ours.pop(root) is None
    assert ours == theirs


def assert_one_tree(spans: list[dict]) -> dict:
    """Every span's parent is in the trace, but the root's; the root."""
    ids = {span["span_id"] for span in spans}
    [root] = [span for span in spans if span["parent_id"] is None]
    assert all(span["parent_id"] in ids for span in spans if span is not root)
    return root


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def document(stack, client):
    """apollo.txt loaded over the websocket: its trace, once every stage is in it."""
    [loaded] = await frames_of(stack, "text-load", {
        "id": "apollo.txt", "title": "Apollo", "text": TEXT, "user": "alice",
        "collection": "space"})
    assert loaded["complete"] and "error" not in loaded["response"]

    def every_stage(spans: list[dict]) -> bool:
        return STAGES <= {(s["name"], s["service"]) for s in spans if s["kind"] == "CONSUMER"}
    return await kept(client, loaded["trace_id"], every_stage)


async def test_a_loaded_document_is_one_trace_through_every_stage(document, phoenix):
    spans = document["spans"]
    root = assert_one_tree(spans)
    assert (root["name"], root["service"]) == ("websocket text-load", "gateway")
    by_id = {span["span_id"]: span for span in spans}
    stages = [span for span in spans if span["kind"] == "CONSUMER"]
    for stage in stages:  # each stage's record was sent by the span it hangs under
        sender = by_id[stage["parent_id"]]
        assert sender["attributes"]["tg.process"] != stage["attributes"]["tg.process"] or \
            sender["service"] != stage["service"] or sender["kind"] == "CONSUMER"
        assert (stage["attributes"]["tg.document"], stage["attributes"]["tg.user"],
                stage["attributes"]["tg.collection"]) == ("apollo.txt", "alice", "space")
    [decode] = [s for s in stages if s["name"] == "decode"]
    assert by_id[decode["parent_id"]]["service"] == "librarian"
    assert_same_tree(document, await at_phoenix(phoenix, document))


async def test_a_graph_question_is_one_trace_across_every_process(stack, document, client,
                                                                  phoenix):
    frames = await frames_of(stack, "graph-rag", {
        "query": "Who walked on the Moon? [tokens=6]", "user": "alice",
        "collection": "space", "streaming": True})
    assert "".join(f["response"].get("chunk", "") for f in frames) == expected_text(6)
    assert frames[0]["response"]["sources"]  # the document's triples were found
    trace_id = frames[-1]["trace_id"]

    def crossed(spans: list[dict]) -> bool:
        return SERVICES <= {s["name"] for s in spans if s["kind"] == "SERVER"}
    trace = await kept(client, trace_id, crossed)
    spans = trace["spans"]
    root = assert_one_tree(spans)
    assert (root["name"], root["kind"], root["attributes"]["tg.user"]) == \
        ("websocket graph-rag", "SERVER", "alice")
    processes = {span["attributes"]["tg.process"] for span in spans}
    assert {"gateway", "triples-store", "vector-store"} <= processes
    assert any("graph-rag" in p for p in processes) and any("embeddings" in p for p in processes)
    by_id = {span["span_id"]: span for span in spans}
    hops = [(by_id[s["parent_id"]], s) for s in spans if s["parent_id"]
            and by_id[s["parent_id"]]["attributes"]["tg.process"] != s["attributes"]["tg.process"]]
    assert len(hops) >= 4  # gateway → group, group → embeddings, → both stores
    for caller, served in hops:  # across the broker: a call span, then the service's
        assert (caller["kind"], served["kind"], caller["name"]) == \
            ("CLIENT", "SERVER", served["name"])
        assert caller["attributes"]["tg.request_id"] == served["attributes"]["tg.request_id"]
    [rag] = [s for s in spans if s["name"] == "graph-rag" and s["kind"] == "SERVER"]
    for span in (root, rag):
        timed = span["attributes"]
        assert 0 < timed["tg.time_to_sources_ms"] < timed["tg.time_to_first_token_ms"] < \
            span["duration_ms"]
    [llm] = [s for s in spans if s["name"] == "text-completion" and s["kind"] == "SERVER"]
    assert (llm["attributes"]["gen_ai.response.model"], llm["attributes"]["llm.model_name"],
            llm["attributes"]["gen_ai.usage.output_tokens"]) == ("fake-gpt", "fake-gpt", 6)

    received = await at_phoenix(phoenix, trace)
    assert_same_tree(trace, received)
    [answered] = [s for s in received if s["context"]["span_id"] == llm["span_id"]]
    assert answered["span_kind"] == "LLM" and \
        answered["attributes"]["llm.token_count.completion"] == 6

    shown = _cli("tg-show-trace", "-u", stack.gateway_url, trace_id)
    assert shown.splitlines()[0].startswith(f"trace {trace_id}")
    assert "websocket graph-rag [gateway]" in shown and "first token" in shown
    assert "└─ text-completion [text-completion" in shown
    listed = _cli("tg-list-explain-traces", "-u", stack.gateway_url, "-C", "space")
    assert trace_id in listed and "GraphRAG" in listed
    explained = _cli("tg-show-explain-trace", "-u", stack.gateway_url, trace_id)
    assert "Question:   Who walked on the Moon?" in explained
    assert "Seeds (" in explained and " kept" in explained


def _cli(*command: str) -> str:
    done = subprocess.run([str(BIN / command[0]), *command[1:]], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout
