"""The MCP server at ``/mcp`` (PROTOCOL §3b, docs/mcp.md), driven by the official
``mcp`` SDK's client over streamable HTTP (both eras of the protocol: the
``initialize`` handshake and 2026-07-28's self-contained requests) and through
``tg-mcp-stdio`` (the SDK's stdio client launching the bridge). Behind the gateway:
the real text-completion (→ the scripted OpenAI-format server), prompt, librarian,
agent and lazy-rag processors and the scripted graph-rag and document-rag services
(tests/support/gateway_rig.py). Searching real passages and a real graph:
test_mcp_retrieval.py.
"""
import asyncio
import uuid

import aiohttp
import httpx2
import pytest
import pytest_asyncio
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.support.agent_llm import AgentReplies, final
from tests.support.gateway_rig import gateway_rig
from tests.support.mcp_bridge import stdio
from tests.support.openai_server import PROMPT_TOKENS, Script, expected_text
from tests.support.scripted_rag import gateways, wire_sources

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEADLINE = 30.0
TOOLS = ["ask", "search", "graph_neighbourhood", "lazy_summary", "list_collections",
         "load_text"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rig(broker, llm, module_data_dir):
    async with gateway_rig(broker.url, llm.base_url, module_data_dir) as rig:
        yield rig


@pytest.fixture(autouse=True)
def scripted(llm):
    llm.script, llm.reply = Script(), None


# How the SDK's client reaches the server: over HTTP with the initialize handshake
# (``legacy``), over HTTP as the SDK chooses (``auto``: 2026-07-28 here), or through
# tg-mcp-stdio (``stdio``: a process per test, so only where the bridge matters).
HTTP = ["legacy", "auto"]
EVERY_WAY = [*HTTP, "stdio"]


def connected(rig, via: str) -> Client:
    """The client, to enter in the test itself (its task groups are left in the task
    that entered them, which a fixture's teardown is not)."""
    server = stdio(rig.url) if via == "stdio" else rig.url + "mcp"
    return Client(server, mode="legacy" if via == "legacy" else "auto",
                  read_timeout_seconds=DEADLINE)


# --- the tools ----------------------------------------------------------------------

@pytest.mark.parametrize("via", EVERY_WAY)
async def test_the_tools_are_listed_with_their_schemas(rig, via):
    async with connected(rig, via) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert list(tools) == TOOLS
        ask = tools["ask"]
        assert ask.input_schema["required"] == ["question"]
        assert ask.input_schema["properties"]["mode"]["enum"] == ["document", "graph", "lazy",
                                                                  "agent"]
        assert {"answer", "sources", "usage"} <= set(ask.output_schema["properties"])
        assert tools["load_text"].annotations.read_only_hint is False
        assert tools["search"].annotations.read_only_hint is True


@pytest.mark.parametrize("via, mode", [(via, "document") for via in EVERY_WAY] +
                         [(via, "graph") for via in HTTP])
async def test_ask_answers_with_sources_and_reports_progress(rig, via, mode):
    async with connected(rig, via) as client:
        told: list[tuple[float, str | None]] = []

        async def progress(done: float, total: float | None, message: str | None) -> None:
            told.append((done, message))

        result = await client.call_tool("ask", {
            "question": "Why? [tokens=8 delay=0.005]", "mode": mode, "collection": "papers"},
            progress_callback=progress)
        service = f"{mode}-rag"
        assert not result.is_error
        assert result.structured_content == {
            "answer": expected_text(8), "sources": wire_sources(service, collection="papers"),
            "usage": {"in_token": PROMPT_TOKENS, "out_token": 8, "model": "scripted-rag"}}
        [text] = result.content
        assert text.text.startswith(expected_text(8) + "\n\nSources:\n[1] papers document 1 (doc1)")
        assert (rig.rag.requests[-1].collection, rig.rag.requests[-1].progress) == ("papers", True)
        # The answer's text as it came, in notifications numbered in order.
        assert "".join(message or "" for _, message in told) == expected_text(8)
        assert [done for done, _ in told] == sorted({done for done, _ in told})


@pytest.mark.parametrize("via", HTTP)
async def test_ask_the_agent_and_lazy_summary(rig, llm, via):
    async with connected(rig, via) as client:
        llm.reply = AgentReplies(react={"Who founded Acme?": [final("Known.", "Ann Smith.")]})
        agent = await client.call_tool("ask", {"question": "Who founded Acme?", "mode": "agent"})
        assert agent.structured_content["answer"] == "Ann Smith."
        assert agent.structured_content["session_id"]
        llm.reply = None
        lazy = await client.call_tool("lazy_summary", {"question": "What is it? [tokens=3]",
                                                       "max_hops": 1})
        assert not lazy.is_error
        assert lazy.structured_content["summary"] == expected_text(3)
        assert 0 <= lazy.structured_content["confidence"] <= 1


@pytest.mark.parametrize("via", HTTP)
async def test_load_text_then_list_collections(rig, via):
    async with connected(rig, via) as client:
        collection = f"notes-{uuid.uuid4().hex[:6]}"
        loaded = await client.call_tool("load_text", {
            "text": "# Acme\n\nAcme was founded in 1952.", "title": "Acme",
            "collection": collection})
        assert not loaded.is_error
        document = loaded.structured_content["id"]
        assert loaded.structured_content == {"id": document, "collection": collection,
                                             "title": "Acme"}
        listed = await client.call_tool("list_collections", {})
        assert {"collection": collection, "documents": 1} in listed.structured_content[
            "collections"]
        again = await client.call_tool("load_text", {
            "text": "# Acme\n\nAcme was founded in 1952.", "collection": collection})
        assert again.structured_content["id"] == document  # the same text: the same document


    # --- failures -------------------------------------------------------------------------

@pytest.mark.parametrize("via", HTTP)
async def test_failures_are_results_the_model_can_read(rig, via):
    async with connected(rig, via) as client:
        failed = await client.call_tool("ask", {"question": "[tokens=5 fail_after=2]",
                                                "mode": "graph"})
        assert failed.is_error
        assert failed.content[0].text == "graph-rag-error: scripted failure"
        bad = await client.call_tool("search", {"query": "x", "limit": 500})
        assert bad.is_error and bad.content[0].text.startswith("bad arguments: limit")
        with pytest.raises(MCPError):
            await client.call_tool("no_such_tool", {})


@pytest.mark.parametrize("via", EVERY_WAY)
async def test_a_cancelled_call_cancels_the_answer(rig, via):
    async with connected(rig, via) as client:
        question = f"[tokens=500 delay=0.02] {uuid.uuid4().hex}"
        started = asyncio.Event()

        async def progress(done: float, total: float | None, message: str | None) -> None:
            started.set()

        call = asyncio.create_task(client.call_tool("ask", {"question": question},
                                                    progress_callback=progress))
        async with asyncio.timeout(DEADLINE):
            await started.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await rig.rag.wait_cancelled(question, DEADLINE)


    # --- who is asking ----------------------------------------------------------------------

async def test_the_key_is_required_and_decides_the_tools(rig, broker):
    async with gateways(broker.url, rig.flow, token="s3cret") as [_, guarded]:
        async with aiohttp.ClientSession() as http:
            async with http.post(guarded + "mcp", json={}) as refused:
                assert refused.status == 401
                assert refused.headers["WWW-Authenticate"] == "Bearer"
        transport = streamable_http_client(guarded + "mcp", http_client=httpx2.AsyncClient(
            headers={"Authorization": "Bearer s3cret"}))
        async with Client(transport) as keyed:
            assert [tool.name for tool in (await keyed.list_tools()).tools] == TOOLS
        async with Client(stdio(guarded, token="s3cret")) as bridged:
            answer = await bridged.call_tool("ask", {"question": "[tokens=2]"})
            assert answer.structured_content["answer"] == expected_text(2)

