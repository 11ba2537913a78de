"""The whole platform with a real model: ``tg-start`` with no LLM configured, as a
new user runs it, so text-completion answers with the bundled SmolLM2-135M on
llama.cpp (one thread, answers of at most ``MAX_TOKENS`` tokens).

A 135M model's words are its own and often wrong, so nothing here checks them;
what is checked is that the stack carries real tokens and ends every dialog:

* document-RAG over the websocket and ``/api/v1/query``: metadata with the right
  source first, then streamed tokens, then one final record with real counts;
* the agent in the ``react`` and ``ask`` patterns: an answer, or a clear
  ``agent-error``, never a hang (their steps and classification are generated
  under a schema, so an answer is what they end with);
* LLM extraction (``TG_EXTRACTOR=llm``): each chunk's triples stored, or one log
  line naming the chunk and why it yielded nothing; ingestion finishes;
* LazyRAG answers (or says what it lacks);
* a client that goes away stops the model: llama.cpp frees the sequence having
  generated fewer tokens than the same request run to its end.
"""
import asyncio
import json
import re
import time
from collections import defaultdict

import aiohttp
import pytest
import pytest_asyncio

from tests.support.stack import Stack
from tests.support.waiting import eventually
from trustgraph.api import AsyncTrustGraph
from trustgraph.pubsub import Bus
from trustgraph.schema import ChunkTriples, flow_topic

pytestmark = pytest.mark.asyncio(loop_scope="module")

MODEL = "SmolLM2-135M-Instruct.Q4_1"
MAX_TOKENS = 40
API_KEY = "e2e-local-model"
# One thread of a loaded two-core machine: a RAG prompt's first token can take
# seconds, a ReAct dialog several model calls.
ANSWER_DEADLINE = 120.0
DIALOG_DEADLINE = 240.0
SCOPE = {"user": "ada", "collection": "local"}
CORPUS = {
    "eiffel.txt": "The Eiffel Tower stands in Paris. Gustave Eiffel's company built it "
                  "for the World Fair of 1889. It is 330 metres tall.",
    "nile.txt": "The Nile flows north through Egypt into the Mediterranean Sea. Its two "
                "great tributaries are the White Nile and the Blue Nile.",
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack():
    async with Stack(env={"TG_LOCAL_THREADS": "1", "TG_LLM_MAX_TOKENS": str(MAX_TOKENS),
                          "TG_LOCAL_API_KEY": API_KEY, "TG_EXTRACTOR": "llm",
                          "TG_REQUEST_TIMEOUT": str(ANSWER_DEADLINE)},
                     startup_timeout=180) as stack:
        yield stack


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(stack):
    async with AsyncTrustGraph(stack.gateway_url) as client:
        yield client


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def corpus(stack, client):
    """Both documents through the whole pipeline, LLM extraction included: for each
    (one-chunk) document, the triples the extractor sent (read off the pipeline's
    ``triples`` stage), or the log line saying why it yielded nothing."""
    sent: dict[str, set[tuple]] = defaultdict(set)

    async def seen(message) -> None:
        record = ChunkTriples.model_validate_json(message.data())
        sent[record.chunk_id].update((t.s.i, t.p.i) for t in record.triples)

    def extracted() -> dict[str, set[tuple] | list[str]]:
        log = stack.log()
        outcome: dict[str, set[tuple] | list[str]] = {}
        for chunk in (f"{name}/c0" for name in CORPUS):
            why = re.findall(rf"{re.escape(chunk)}: nothing extracted: .*", log)
            if sent.get(chunk) or why:
                outcome[chunk] = sent.get(chunk) or why
        return outcome

    bus = Bus(stack.broker_url)
    await bus.consume(flow_topic("triples", "default"), "e2e-local-watch", seen)
    try:
        for name, text in CORPUS.items():
            await client.load_text(text, name, title=name.removesuffix(".txt").title(),
                                   **SCOPE)
        await eventually(lambda: all_done(client), "ingestion to finish",
                         timeout=DIALOG_DEADLINE, every=0.5)
        yield await eventually(extracted, "every chunk's extraction to end", every=0.5,
                               timeout=DIALOG_DEADLINE,
                               accept=lambda found: len(found) == len(CORPUS))
    finally:
        await bus.close()


async def all_done(client: AsyncTrustGraph) -> bool:
    statuses = await client.load_status(list(CORPUS), **SCOPE)
    assert not [s for s in statuses if s["state"] == "failed"], statuses
    return all(s["state"] == "done" for s in statuses)


async def socket_frames(stack: Stack, service: str, request: dict,
                        deadline: float = ANSWER_DEADLINE) -> list[dict]:
    """Every response to one streaming request, up to the complete one."""
    frames: list[dict] = []
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(stack.websocket_url) as ws:
            await ws.send_json({"id": "e2e", "service": service,
                                "request": {"streaming": True, **request}})
            async with asyncio.timeout(deadline):
                while not frames or not frames[-1]["complete"]:
                    frames.append(await ws.receive_json())
    assert [f["complete"] for f in frames].count(True) == 1
    return [frame["response"] for frame in frames]


async def model_counters(stack: Stack) -> dict[str, float]:
    """llama.cpp's own counters, from its server (its address is in the log)."""
    url = re.findall(r"local model \S+ loaded in [\d.]+ s: (\S+)", stack.log())[-1]
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {API_KEY}"}) as http, \
            http.get(f"{url}/metrics") as response:
        text = await response.text()
    pairs = (line.split() for line in text.splitlines() if not line.startswith("#"))
    return {name.removeprefix("llamacpp:"): float(value) for name, value in pairs}


def check_final_usage(final: dict) -> None:
    assert final["model"] == MODEL
    assert final["in_token"] > 20  # the RAG prompt, counted by llama.cpp
    assert 0 < final["out_token"] <= MAX_TOKENS


async def test_tg_start_says_the_answers_come_from_a_tiny_demo_model(stack):
    log = stack.log()
    assert f"tg-start: llm             local: {MODEL}, a tiny offline demo model" in log
    assert "For real answers point the platform at an LLM: TG_LLM=openai" in log


async def test_document_rag_streams_real_tokens_after_its_sources(stack, corpus):
    frames = await socket_frames(stack, "document-rag", {
        "query": "Who built the Eiffel Tower?", "doc-limit": 1, **SCOPE})
    metadata, *deltas, final = frames
    assert metadata["message_type"] == "metadata"
    assert [s["document_id"] for s in metadata["sources"]] == ["eiffel.txt"]
    assert len(deltas) > 1 and all(d["message_type"] == "chunk" for d in deltas)
    assert "".join(d["chunk"] for d in deltas).strip()
    assert final["end_of_stream"] and final["end_of_session"]
    check_final_usage(final)


async def test_answer_stream_api_streams_real_tokens(stack, corpus):
    async with aiohttp.ClientSession() as http:
        async with asyncio.timeout(ANSWER_DEADLINE):
            async with http.post(stack.gateway_url + "api/v1/query", json={
                    "query": "Where does the Nile flow?", "stream": True,
                    "mode": "document", "doc_limit": 1, **SCOPE}) as response:
                assert response.status == 200
                lines = [json.loads(line) async for line in response.content if line.strip()]
    metadata, *content, done = lines
    assert metadata["type"] == "metadata"
    assert [s["document_id"] for s in metadata["sources"]] == ["nile.txt"]
    assert content and all(line["type"] == "content" for line in content)
    assert "".join(line["delta"] for line in content).strip()
    assert done["type"] == "done"
    check_final_usage(done["usage"])


@pytest.mark.parametrize("pattern", ["react", "ask"])
async def test_every_agent_dialog_ends_with_an_answer_or_a_clear_error(stack, corpus,
                                                                       pattern):
    started = time.monotonic()
    frames = await socket_frames(stack, "agent", {
        "question": "How tall is the Eiffel Tower?", "pattern": pattern, **SCOPE},
        deadline=DIALOG_DEADLINE)
    last = frames[-1]
    assert last["end_of_dialog"] and last["chunk_type"] in ("answer", "error"), last
    if last["chunk_type"] == "error":  # the model's output could not be followed
        assert re.search(r"agent-classify|could not be followed|no final answer|"
                         r"not one of", last["content"]), last["content"]
    else:
        assert "".join(f["content"] for f in frames if f["chunk_type"] == "answer").strip()
    print(f"{pattern}: {last['chunk_type']} after {time.monotonic() - started:.1f} s, "
          f"{len(frames)} frames: {last['content'][:200]!r}")


async def test_llm_extraction_stores_triples_or_says_why_per_chunk(client, corpus):
    stored = {(t["s"]["i"], t["p"]["i"]) for t in await client.triples(limit=1000, **SCOPE)}
    for chunk, outcome in corpus.items():
        if isinstance(outcome, set):  # what the extractor sent is in the store
            assert outcome <= stored, chunk
        else:  # nothing could be used: said once, naming the chunk and why
            [line] = outcome
            assert re.search(r": extract-(definitions|relationships)|found nothing", line), line
        print(f"{chunk}: {outcome}")


async def test_lazy_rag_answers_with_the_real_model(stack, corpus):
    frames = await socket_frames(stack, "lazy-rag", {
        "query": "What is the Nile?", **SCOPE}, deadline=DIALOG_DEADLINE)
    final = frames[-1]
    assert final.get("end_of_stream") or final.get("error"), final
    if not final.get("error"):
        assert final["model"] == MODEL


async def test_a_client_that_goes_away_stops_the_models_generation(stack, corpus):
    question = {"query": "Count from one to one hundred in words.", "doc-limit": 1, **SCOPE}
    # The same request run to its end: how many tokens it takes (greedy decoding and
    # the cached prompt make the rerun the same).
    full = (await socket_frames(stack, "document-rag", question))[-1]["out_token"]
    assert full >= 20, f"the uninterrupted answer ran only {full} tokens: nothing to cut"
    before = (await model_counters(stack))["tokens_predicted_total"]
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(stack.websocket_url) as ws:
            await ws.send_json({"id": "gone", "service": "document-rag",
                                "request": {"streaming": True, **question}})
            async with asyncio.timeout(ANSWER_DEADLINE):
                assert (await ws.receive_json())["response"]["message_type"] == "metadata"
                assert (await ws.receive_json())["response"]["chunk"]
    counters = await eventually(lambda: model_counters(stack), "the sequence to be freed",
                                accept=lambda c: c["requests_processing"] == 0)
    assert counters["tokens_predicted_total"] - before < full
