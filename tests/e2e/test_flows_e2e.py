"""Flows started and stopped while one ``tg-start`` default stack runs (issue 31):
two flows answer from two LLMs (two local OpenAI-format servers); a flow started with
a smaller chunk size stores more chunks of the same text; a flow stopped mid-ingest
and started again ends with every chunk stored; a processor SIGKILLed and restarted
serves the running flows again; a stopped flow is a clear 404 on every transport.

The loading tests start their flows from a blueprint of their own naming only the
processors that chunk and store vectors (``VECTORS``), so the machine's two cores
are not spent extracting knowledge nobody reads here."""
import asyncio
import json
import random
import time

import aiohttp
import pytest
import pytest_asyncio
from mcp.client.client import Client

from tests.support.cli import tg_command
from tests.support.pdf import minimal_pdf
from tests.support.stack import Stack, openai_server_thread
from tests.support.waiting import eventually
from trustgraph.api import AsyncTrustGraph, TrustGraphError
from trustgraph.run.registry import DEFAULT_STACK

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(600)]

ANSWERING = next(entry for entry in DEFAULT_STACK if "text-completion" in entry.split("+"))
DEADLINE = 180.0  # seconds a load may take to be stored on a busy 2-core machine
VECTORS = {"description": "chunks and their vectors only", "processors": [
    "librarian", "decoder", "embeddings", "chunk-embeddings", "vector-store"],
    "parameters": {"chunk-size": {"type": "chunk-size"},
                   "chunk-overlap": {"type": "chunk-overlap"}},
    "interfaces": ["text-load", "load-status"]}


def text(words: int, seed: int = 7) -> str:
    """Sentences of plain words, the same every time."""
    vocabulary = ("river", "harbour", "mill", "engine", "lantern", "orchard", "bridge",
                  "signal", "granite", "meadow", "copper", "winter", "ledger", "market")
    chooser = random.Random(seed)
    sentences = [" ".join(chooser.choice(vocabulary) for _ in range(11)).capitalize() + "."
                 for _ in range(words // 11)]
    return " ".join(sentences)


@pytest.fixture(scope="module")
def llms():
    with openai_server_thread() as first, openai_server_thread() as second:
        first.reply = lambda prompt: "answered by the first LLM"
        second.reply = lambda prompt: "answered by the second LLM"
        yield first, second


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(llms):
    async with Stack(env={"OPENAI_BASE_URL": llms[0].base_url, "OPENAI_API_KEY": "test",
                          "TG_LLM": "openai"}, startup_timeout=120) as stack:
        yield stack


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(stack):
    async with AsyncTrustGraph(stack.gateway_url) as client:
        await client.put_blueprint("vectors", VECTORS)
        yield client


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def strong(client, llms):
    """Flow ``strong``: the default blueprint, answered by the second LLM's big-model;
    how long from its start to its first answer."""
    await client.start_flow("strong", "default", "the second LLM",
                            {"llm-base-url": llms[1].base_url, "llm-model": "big-model"})
    started = time.monotonic()
    answer = await client.text_completion("", "hello", flow="strong")
    return answer, time.monotonic() - started


async def test_two_flows_answer_from_two_llms(client, llms, strong):
    answer, took = strong
    assert answer == "answered by the second LLM"
    print(f"start-flow to the first answer on it: {took:.2f} s")
    assert llms[1].asked()["model"] == "big-model"
    assert await client.text_completion("", "hello") == "answered by the first LLM"
    assert set(await client.list_flows()) >= {"default", "strong"}
    assert (await client.get_flow("strong"))["parameters"]["llm-model"] == "big-model"


async def test_a_bad_parameter_starts_nothing(client):
    with pytest.raises(TrustGraphError) as refused:
        await client.start_flow("broken", "default", "", {"chunk-size": "lots"})
    assert refused.value.type == "bad-request"
    assert "chunk-size" in refused.value.message
    assert "broken" not in await client.list_flows()


async def loaded(client: AsyncTrustGraph, document: str, collection: str, flow: str
                 ) -> dict:
    """The document's load status once its every chunk is stored. Asked right after
    start-flow, a store may not serve the flow yet (processors follow within a bound,
    longer on a busy machine): asked again then."""
    async def status() -> dict:
        try:
            [state] = await client.load_status([document], collection=collection, flow=flow)
        except TrustGraphError as error:
            if error.type != "no-service":
                raise
            return {"state": f"not served yet: {error}"}
        return state
    return await eventually(status, f"{document} stored on {flow}", timeout=DEADLINE,
                            accept=lambda state: state["state"] == "done", every=0.5)


async def test_a_smaller_chunk_size_stores_more_chunks_of_the_same_text(client):
    await client.start_flow("fine", "vectors", "small chunks",
                            {"chunk-size": "32", "chunk-overlap": "0"})
    await client.start_flow("coarse", "vectors", "large chunks", {"chunk-size": "256"})
    same = text(1500)
    await client.load_text(same, "same", collection="fine", flow="fine")
    await client.load_text(same, "same", collection="coarse", flow="coarse")
    fine = await loaded(client, "same", "fine", "fine")
    coarse = await loaded(client, "same", "coarse", "coarse")
    assert fine["chunks"] > 3 * coarse["chunks"] > 0
    assert fine["stored"] == fine["chunks"]


async def test_a_flow_stopped_mid_ingest_stores_every_chunk_once_started_again(client):
    parameters = {"chunk-size": "16", "chunk-overlap": "0"}
    await client.start_flow("paused", "vectors", "stopped mid-ingest", parameters)
    await client.load_text(text(30_000, seed=3), "long", collection="paused", flow="paused")

    async def status() -> dict:
        [state] = await client.load_status(["long"], collection="paused", flow="paused")
        return state
    mid = await eventually(status, "the first chunks stored", timeout=DEADLINE,
                           accept=lambda state: state["stored"] > 0, every=0.2)
    await client.stop_flow("paused")
    assert mid["stored"] < mid["chunks"], "the load finished before the flow stopped"
    with pytest.raises(TrustGraphError) as refused:
        await status()
    assert refused.value.type == "unknown-flow"

    await client.start_flow("paused", "vectors", "started again", parameters)
    done = await loaded(client, "long", "paused", "paused")
    assert done["stored"] == done["chunks"] == mid["chunks"]
    print(f"{mid['stored']} of {mid['chunks']} chunks stored when the flow stopped")


async def test_a_killed_processor_serves_the_running_flows_again(stack, client, strong):
    old = stack.kill(ANSWERING)
    await asyncio.to_thread(stack.wait_restarted, ANSWERING, old, 90.0)
    assert await client.text_completion("", "again", flow="strong") == \
        "answered by the second LLM"


async def test_a_stopped_flow_is_not_found_on_every_transport(stack, client):
    await client.start_flow("brief", "default", "stopped at once")
    assert await client.text_completion("", "hi", flow="brief") == "answered by the first LLM"
    await client.stop_flow("brief")
    with pytest.raises(TrustGraphError) as socket:
        await client.text_completion("", "hi", flow="brief")
    assert socket.value.type == "unknown-flow" and "running: " in socket.value.message
    async with aiohttp.ClientSession() as http:
        rest = await http.post(f"{stack.gateway_url}api/v1/flow/brief/service/text-completion",
                               json={"system": "", "prompt": "hi"})
        assert rest.status == 404
        assert (await rest.json())["error"]["type"] == "unknown-flow"
        openai = await http.post(f"{stack.gateway_url}v1/chat/completions", json={
            "model": "llm@brief", "messages": [{"role": "user", "content": "hi"}]})
        assert openai.status == 404
        assert (await openai.json())["error"]["code"] == "unknown-flow"
    async with Client(f"{stack.gateway_url}mcp?flow=brief", mode="legacy",
                      read_timeout_seconds=30) as mcp:
        called = await mcp.call_tool("ask", {"question": "hi"})
    assert called.is_error and "unknown-flow" in called.content[0].text


# Every command that asks a flow's services, with what it needs besides -f.
FLOW_COMMANDS = {
    "tg-invoke-llm": ["", "hello"],
    "tg-invoke-prompt": ["document-prompt", "query=hello", "documents:=[]"],
    "tg-invoke-document-rag": ["-q", "hello"],
    "tg-invoke-graph-rag": ["-q", "hello"],
    "tg-invoke-lazy-rag": ["-q", "hello"],
    "tg-invoke-agent": ["-q", "hello"],
    "tg-invoke-embeddings": ["hello"],
    "tg-load-text": ["{dir}/a.txt"],
    "tg-load-pdf": ["{dir}/a.pdf"],
    "tg-load-turtle": ["{dir}/a.ttl"],
}
ANSWERED = ["tg-invoke-llm", "tg-invoke-prompt", "tg-invoke-document-rag",
            "tg-invoke-graph-rag", "tg-invoke-lazy-rag"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("files")
    (folder / "a.txt").write_text("A lantern by the river.")
    (folder / "a.pdf").write_bytes(minimal_pdf([["A lantern by the river."]]))
    (folder / "a.ttl").write_text("<http://x/a> <http://x/b> <http://x/c> .\n")
    return folder


@pytest.mark.parametrize("command", FLOW_COMMANDS)
async def test_every_command_asks_the_flow_it_names(stack, files, command):
    argv = [arg.format(dir=files) for arg in FLOW_COMMANDS[command]]
    status, out, err = await tg_command(command, "-u", stack.gateway_url, "-f", "nowhere",
                                        *argv, timeout=60)
    assert status != 0 and "unknown-flow" in err and "'nowhere'" in err, (out, err)


@pytest.mark.parametrize("command", ANSWERED)
async def test_the_answering_commands_answer_from_the_flows_llm(stack, strong, command):
    status, out, err = await tg_command(command, "-u", stack.gateway_url, "-f", "strong",
                                        *FLOW_COMMANDS[command], timeout=60)
    assert status == 0, err
    assert "answered by the second LLM" in out


async def test_the_flow_commands(stack, client, strong):
    url = ["-u", stack.gateway_url]
    status, out, err = await tg_command("tg-show-flows", *url, timeout=30)
    assert status == 0, err
    assert "strong" in out and "llm-model = big-model" in out
    status, out, err = await tg_command("tg-show-flow-blueprints", *url, timeout=30)
    assert status == 0 and "vectors" in out and "chunk-size" in out, err
    status, out, err = await tg_command("tg-show-parameter-types", *url, "-t", "chunk-size",
                                        timeout=30)
    assert status == 0 and "integer" in out, err
    status, out, err = await tg_command("tg-get-flow-blueprint", *url, "-n", "vectors",
                                        timeout=30)
    assert status == 0 and json.loads(out)["processors"] == VECTORS["processors"], err
