"""The agent end to end: ``tg-start`` running its default stack (the agent in the
answering group with prompt, text-completion, graph-rag and document-rag), a small
corpus loaded through the pipeline for two users, the gateway's websocket; the LLM
is the local OpenAI-format server on a thread of its own, its replies scripted per
prompt (``AgentReplies``), and an MCP server built with the ``mcp`` SDK serves a tool.

* ReAct with two tools: the real GraphRAG (its observation is GraphRAG's answer, made
  from the loaded corpus) and an MCP tool put in config as ``tg-set-tool`` does;
  frames in the order of seed 003, token totals on the last;
* ask on each route: the thought naming the route, with the sources, before the
  first answer token;
* a three-turn session whose third question only makes sense with the first;
* a client that goes away mid-answer: the LLM server sees it, no turn is saved;
* tenancy: another user's session of the same id is empty, and their documents are
  not cited.
"""
import asyncio
import sqlite3
import time

import aiohttp
import pytest
import pytest_asyncio

from tests.support.agent_llm import SYSTEM, AgentReplies, final, step
from tests.support.mcp_tools import mcp_server
from tests.support.openai_server import PROMPT_TOKENS
from tests.support.stack import Stack, openai_server_thread
from trustgraph.api import AsyncTrustGraph

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEADLINE = 90.0  # for the pipeline to settle
ANSWER_DEADLINE = 30.0
ALICE = {"user": "alice", "collection": "space"}
BOB = {"user": "bob", "collection": "space"}
CORPUS = {
    "alice": ("apollo.txt", "The Apollo lunar module Eagle landed in the Sea of "
              "Tranquility. Neil Armstrong and Buzz Aldrin walked on the Moon while "
              "Michael Collins orbited in the command module Columbia."),
    "bob": ("voyager.txt", "The Voyager probes flew past Jupiter and Saturn and "
            "photographed the volcanoes of Io before leaving the solar system."),
}


@pytest.fixture(scope="module")
def llm():
    with openai_server_thread() as server:
        server.reply = AgentReplies()
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mcp():
    async with mcp_server() as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(llm):
    async with Stack(env={"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "test",
                          "TG_REQUEST_TIMEOUT": "20"}, startup_timeout=120) as stack:
        yield stack


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(stack):
    async with AsyncTrustGraph(stack.gateway_url) as client:
        yield client


async def until(check, what: str, timeout: float = DEADLINE):
    deadline = time.monotonic() + timeout
    while not (value := await check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.1)
    return value


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def corpus(stack, client, llm, mcp):
    """Each user's document searchable in both stores, and the MCP tool offered."""
    await client.put_config({"tool": {"adder": {
        "name": "add", "kind": "mcp-tool", "url": mcp.url, "group": ["math", "default"],
        "description": "Adds two integers.", "arguments": [
            {"name": "a", "type": "integer"}, {"name": "b", "type": "integer"}]}}})
    await asyncio.gather(*(client.load_text(text, name, user=user, collection="space",
                                            title=name.removesuffix(".txt").title())
                           for user, (name, text) in CORPUS.items()))
    await asyncio.gather(*(until(lambda user=user, name=name: searchable(client, user, name),
                                 f"{user}'s {name}") for user, (name, _) in CORPUS.items()))
    llm.reply.react["Which tools"] = [final("I see them.", "These.")]
    await until(lambda: offered(stack, llm), "the agent to offer the MCP tool", 10)


async def searchable(client: AsyncTrustGraph, user: str, name: str) -> bool:
    [status] = await client.load_status([name], user=user, collection="space")
    if status["state"] != "done":
        return False
    [probe] = await client.embeddings(["anything"])
    return bool(await client.triples(limit=1, user=user, collection="space")
                and await client.graph_embeddings(probe, limit=1, user=user,
                                                  collection="space"))


async def offered(stack: Stack, llm) -> bool:
    await socket_frames(stack, {"question": "Which tools are there?", "group": ["math"]})
    return "- add: Adds two integers." in llm.prompts[-1]


async def socket_frames(stack: Stack, request: dict) -> list[dict]:
    """The responses to one streaming agent request, up to the complete one."""
    frames: list[dict] = []
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(stack.websocket_url) as ws:
            await ws.send_json({"id": "e2e", "service": "agent",
                                "request": {"streaming": True, **request}})
            async with asyncio.timeout(ANSWER_DEADLINE):
                while not frames or not frames[-1]["complete"]:
                    frames.append(await ws.receive_json())
    assert [f["complete"] for f in frames].count(True) == 1
    return [frame["response"] for frame in frames]


def sequence(frames: list[dict]) -> list[str]:
    """Frame types, a run of the same type and end flag as one ("." = end_of_message)."""
    out: list[str] = []
    for frame in frames:
        item = frame["chunk_type"] + ("." if frame["end_of_message"] else "")
        if not out or out[-1] != item:
            out.append(item)
    return out


def text_of(frames: list[dict], kind: str) -> str:
    return "".join(frame["content"] for frame in frames if frame["chunk_type"] == kind)


def saved_turns(stack: Stack, user: str, session: str) -> list[tuple[str, str]]:
    with sqlite3.connect(stack.data_dir / "agent" / "sessions.db") as db:
        return db.execute("SELECT question, answer FROM turns WHERE user = ? AND "
                          "session_id = ? ORDER BY id", (user, session)).fetchall()


async def test_react_dialog_with_graph_rag_and_an_mcp_tool(stack, llm, mcp, corpus):
    graph_answer = "Neil Armstrong and Buzz Aldrin walked on the Moon."
    llm.reply.answers["Who walked on the Moon?"] = graph_answer
    llm.reply.react["How many people walked"] = [
        step("The knowledge graph knows who walked there.", "knowledge-query",
             question="Who walked on the Moon?"),
        step("Two people; add the one who orbited.", "add", a=2, b=1),
        final("Both numbers are known.", "Two walked on the Moon; three flew Apollo 11.")]
    frames = await socket_frames(stack, {"question": "How many people walked on the Moon?",
                                         "session_id": "react", **ALICE})
    assert sequence(frames) == ["thought", "thought.", "action.", "observation.",
                                "thought", "thought.", "action.", "observation.",
                                "thought", "thought.", "answer", "answer."]
    assert all(frame["message_type"] == frame["chunk_type"] for frame in frames)
    actions = [(f["content"], f["arguments"]) for f in frames if f["chunk_type"] == "action"]
    assert actions == [("knowledge-query", {"question": "Who walked on the Moon?"}),
                       ("add", {"a": 2, "b": 1})]
    observations = [f["content"] for f in frames if f["chunk_type"] == "observation"]
    assert observations == [graph_answer, "3"]
    # GraphRAG answered from the graph the pipeline built from alice's document.
    kg_prompt = next(p for p in llm.prompts if "Question: Who walked on the Moon?" in p
                     and "Knowledge statements:" in p)
    assert "Armstrong" in kg_prompt and "Voyager" not in kg_prompt
    assert text_of(frames, "thought").startswith("The knowledge graph knows")
    assert text_of(frames, "answer") == "Two walked on the Moon; three flew Apollo 11."
    last = frames[-1]
    assert last["end_of_dialog"] and not any(f["end_of_dialog"] for f in frames[:-1])
    # Three agent-react calls and GraphRAG's answer: every LLM call of the dialog.
    assert last["in_token"] == 4 * PROMPT_TOKENS and last["model"] == "fake-gpt"
    assert last["session_id"] == "react"


@pytest.mark.parametrize("route, question", [
    ("knowledge", "Who orbited in the command module?"),
    ("code", "How do I reverse a list in Python?"),
    ("conversational", "Hello there, how are you today?"),
])
async def test_ask_sends_route_and_sources_before_the_answer(stack, llm, corpus, route,
                                                             question):
    llm.reply.routes[question] = route
    frames = await socket_frames(stack, {"question": f"{question} [tokens=6]",
                                         "pattern": "ask", **ALICE})
    thought, *answer = frames
    assert (thought["chunk_type"], thought["end_of_message"], thought["route"]) == (
        "thought", True, route)
    assert question in thought["content"]
    sources = thought["sources"]
    if route == "knowledge":
        assert {s["document_id"] for s in sources} == {"apollo.txt"}
        assert "Michael Collins" in sources[0]["text"]
    else:
        assert sources == []
    assert sequence(answer) == ["answer", "answer."] and answer[-1]["end_of_dialog"]
    assert text_of(answer, "answer") == "".join(f"tok{i} " for i in range(6))
    assert SYSTEM[f"agent-{route}"] in llm.prompts[-1]  # the route's own template


async def test_three_turns_where_the_third_leans_on_the_first(stack, llm, corpus):
    session = {"session_id": "trip", "pattern": "ask", **ALICE}
    replies = llm.reply
    replies.routes |= {"Who stayed in orbit": "knowledge", "Write a haiku": "conversational",
                       "What was his ship": "knowledge"}
    replies.answers["Who stayed in orbit"] = "Michael Collins stayed in orbit."
    replies.reformulated |= {"Write a haiku": "Write a haiku about the Moon.",
                             "What was his ship": "What was Michael Collins' ship called?"}
    replies.answers["What was Michael Collins' ship"] = "Columbia, the command module."
    for question in ("Who stayed in orbit?", "Write a haiku", "What was his ship called?"):
        frames = await socket_frames(stack, {"question": question, **session})
    assert frames[0]["content"] == ("Route: knowledge. Question: What was Michael "
                                    "Collins' ship called?")
    reformulate = next(p for p in reversed(llm.prompts) if "Latest question: What was his" in p)
    assert "User: Who stayed in orbit?\nAssistant: Michael Collins stayed in orbit." in \
        reformulate
    assert text_of(frames, "answer") == "Columbia, the command module."
    assert [q for q, _ in saved_turns(stack, "alice", "trip")] == [
        "Who stayed in orbit?", "Write a haiku", "What was his ship called?"]


async def test_going_away_mid_answer_stops_the_llm_and_saves_no_turn(stack, llm, corpus):
    question = "Tell me a very long story"
    llm.reply.routes[question] = "conversational"
    before = len(llm.stats.closed_early)
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(stack.websocket_url) as ws:
            await ws.send_json({"id": "gone", "service": "agent", "request": {
                "question": f"{question} [tokens=3000 delay=0.01]", "streaming": True,
                "pattern": "ask", "session_id": "gone", **ALICE}})
            async with asyncio.timeout(ANSWER_DEADLINE):
                assert (await ws.receive_json())["response"]["chunk_type"] == "thought"
                assert (await ws.receive_json())["response"]["chunk_type"] == "answer"
    async with asyncio.timeout(1):  # the bound: the LLM hears of it within 1 s
        while len(llm.stats.closed_early) == before:
            await asyncio.sleep(0.01)
    assert saved_turns(stack, "alice", "gone") == []


async def test_another_users_session_and_documents_stay_invisible(stack, llm, corpus):
    question = "What did the probes photograph?"
    llm.reply.routes[question] = "knowledge"
    frames = await socket_frames(stack, {"question": question, "pattern": "ask",
                                         "session_id": "trip", **BOB})
    assert {s["document_id"] for s in frames[0]["sources"]} == {"voyager.txt"}
    classify = next(p for p in reversed(llm.prompts) if "Latest question: What did the" in p)
    assert "Conversation so far" not in classify  # alice's "trip" is not bob's
    assert [q for q, _ in saved_turns(stack, "bob", "trip")] == [question]
