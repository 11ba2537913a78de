"""The agent over a real pulsar-lite broker, with the parts it calls running in this
process: config, prompt, text-completion (openai provider → a local OpenAI-format
server whose replies are scripted per prompt), scripted graph-rag/document-rag
services, and a tiny MCP server built with the official ``mcp`` SDK.

* a ReAct dialog that calls GraphRAG and then an MCP tool, frames in seed 003 order;
* a request's ``group`` decides which tools the model is offered;
* an MCP tool's error is the observation, and the model goes on;
* a session remembers its turns, for its own user only;
* a cancel mid-thought stops the LLM stream and saves no turn; a cancel during an MCP
  call stops the call on the server; a cancel during a GraphRAG call stops GraphRAG's
  answer.
"""
import asyncio
import uuid
from contextlib import aclosing

import pytest
import pytest_asyncio

from tests.support.agent_llm import AgentReplies, final, step
from tests.support.mcp_tools import mcp_server
from tests.support.openai_server import PROMPT_TOKENS, OpenAiServer, expected_text
from tests.support.scripted_rag import ScriptedRag, answering, start_scripted_rag
from trustgraph.agent.service import SPEC as AGENT_SPEC
from trustgraph.agent.service import AgentSettings
from trustgraph.agent.sessions import SessionStore, Turn
from trustgraph.agent.toolbox import default_values
from trustgraph.base import ConfigClient, Processor, Requester, Timing
from trustgraph.config.service import SPEC as CONFIG_SPEC
from trustgraph.config.service import ConfigSettings
from trustgraph.model.text_completion.openai.provider import Settings as OpenAiSettings
from trustgraph.model.text_completion.service import spec_for
from trustgraph.prompt.service import SPEC as PROMPT_SPEC
from trustgraph.prompt.service import PromptSettings
from trustgraph.pubsub import Bus
from trustgraph.schema import AgentRequest, AgentResponse, decode
from trustgraph.schema.tool import ToolArgument, ToolDefinition

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEADLINE = 20.0
RAG_TOKENS = 5  # what the scripted graph-rag answers: tok0 .. tok4


def mcp_tools(url: str) -> dict[str, dict]:
    number = [ToolArgument(name=n, type="integer", description="a number") for n in "ab"]
    return {
        "adder": ToolDefinition(name="add", kind="mcp-tool", url=url, group=["math"],
                                description="Adds two integers.", arguments=number),
        "failing": ToolDefinition(name="fail", kind="mcp-tool", url=url, group=["math"],
                                  description="Always fails."),
        "waiting": ToolDefinition(name="wait", kind="mcp-tool", url=url, group=["slow"],
                                  description="Waits.", arguments=[
                                      ToolArgument(name="seconds", type="number")]),
    }


class Agent:
    """The running parts, and a way to ask the agent."""

    def __init__(self, broker, llm: OpenAiServer, mcp, data_dir) -> None:
        self.url, self.llm, self.mcp, self.data_dir = broker.url, llm, mcp, data_dir
        self.flow = f"agent-{uuid.uuid4().hex[:6]}"
        self.replies = llm.reply = AgentReplies()
        self.rag = ScriptedRag()
        self.processors: list[Processor] = []
        self.bus = Bus(self.url)

    async def start(self) -> "Agent":
        common = {"pulsar_url": self.url, "tg_flows": [self.flow], "tg_request_timeout": 20}
        config = Processor(CONFIG_SPEC, ConfigSettings(pulsar_url=self.url,
                                                       tg_data_dir=str(self.data_dir)))
        await self._started(config)
        client = await ConfigClient.connect(self.bus, f"test-{uuid.uuid4().hex[:6]}")
        await client.put_many("tool", {**default_values(), **{
            id: tool.config_value() for id, tool in mcp_tools(self.mcp.url).items()}})
        self.processors.append(await start_scripted_rag(self.url, self.flow, self.rag))
        for processor in (
                Processor(spec_for("openai"), OpenAiSettings(
                    openai_base_url=self.llm.base_url, openai_api_key="test", **common)),
                Processor(PROMPT_SPEC, PromptSettings(**common)),
                Processor(AGENT_SPEC, AgentSettings(tg_data_dir=str(self.data_dir),
                                                    **common))):
            await self._started(processor)
        await answering(self.url, "agent", self.flow, probe=AgentRequest(
            question="probe [tokens=1]", pattern="ask"), response=AgentResponse)
        self.agent = Requester(self.bus, "agent", self.flow, f"test-{uuid.uuid4().hex[:6]}",
                               timing=Timing(timeout=DEADLINE))
        await self.agent.start()
        return self

    async def _started(self, processor: Processor) -> None:
        self.processors.append(processor)
        await processor.start()

    async def stop(self) -> None:
        await self.bus.close()
        # At once: each takes ~0.4 s to close its connection, and none needs another.
        await asyncio.gather(*(processor.stop() for processor in self.processors))

    async def frames(self, **request) -> list[AgentResponse]:
        async with asyncio.timeout(DEADLINE):
            return [decode(AgentResponse, data) async for batch in
                    self.agent.frames(AgentRequest(streaming=True, **request))
                    for data, _ in batch]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def agent(broker, tmp_path_factory):
    llm = await OpenAiServer().start()
    async with mcp_server() as mcp:
        running = Agent(broker, llm, mcp, tmp_path_factory.mktemp("agent"))
        try:
            yield await running.start()
        finally:
            await running.stop()
            await llm.stop()


async def saved_turns(agent: Agent, user: str, session: str) -> list[Turn]:
    store = SessionStore(agent.data_dir / "agent" / "sessions.db")
    try:
        return await store.turns(user, session, 10)
    finally:
        store.close()


def sequence(frames: list[AgentResponse]) -> list[str]:
    """The frame types with runs of the same type (and end flag) as one."""
    out: list[str] = []
    for frame in frames:
        item = frame.chunk_type + ("." if frame.end_of_message else "")
        if not out or out[-1] != item:
            out.append(item)
    return out


async def test_react_dialog_calls_graph_rag_then_an_mcp_tool(agent):
    agent.replies.react["How many moons"] = [
        step("I should look this up.", "knowledge-query", question="moons of Mars?"),
        step("Now add them.", "add", a=2, b=3),
        final("The sum is known.", "Mars has 2 moons; 2 + 3 = 5.")]
    frames = await agent.frames(question="How many moons, plus three?", user="ann",
                                collection="space", session_id="moons")
    assert sequence(frames) == ["thought", "thought.", "action.", "observation.",
                                "thought", "thought.", "action.", "observation.",
                                "thought", "thought.", "answer", "answer."]
    actions = [f for f in frames if f.chunk_type == "action"]
    assert [(a.tool, a.arguments) for a in actions] == [
        ("knowledge-query", {"question": "moons of Mars?"}), ("add", {"a": 2, "b": 3})]
    observations = [f.content for f in frames if f.chunk_type == "observation"]
    assert observations == [expected_text(RAG_TOKENS), "5"]
    [rag_request] = agent.rag.requests
    assert (rag_request.query, rag_request.user, rag_request.collection) == (
        "moons of Mars?", "ann", "space")
    assert agent.mcp.calls[-1] == ("add", {"a": 2, "b": 3})
    last = frames[-1]
    assert "".join(f.content for f in frames if f.chunk_type == "answer") == \
        "Mars has 2 moons; 2 + 3 = 5."
    assert last.end_of_dialog and all(not f.end_of_dialog for f in frames[:-1])
    # Three agent-react calls and the GraphRAG answer's own.
    assert last.in_token == 4 * PROMPT_TOKENS and last.model == "fake-gpt"
    assert last.session_id == frames[0].session_id == "moons"
    assert await saved_turns(agent, "ann", "moons") == [
        Turn("How many moons, plus three?", "Mars has 2 moons; 2 + 3 = 5.")]


async def test_group_chooses_the_tools_offered(agent):
    agent.replies.react["Which tools"] = [final("I can see my tools.", "Some.")]
    await agent.frames(question="Which tools do you have?", group=["math"])
    offered = agent.llm.prompts[-1]
    assert "- add: Adds two integers." in offered and "- fail:" in offered
    assert "knowledge-query" not in offered and "- wait:" not in offered
    await agent.frames(question="Which tools now?", group=["nothing-here"])
    assert "(no tools are available" in agent.llm.prompts[-1]


async def test_a_failing_tool_is_an_observation(agent):
    agent.replies.react["Try the failing"] = [
        step("Try it.", "fail"), final("It failed.", "The tool failed.")]
    frames = await agent.frames(question="Try the failing tool", group=["math"])
    [observation] = [f.content for f in frames if f.chunk_type == "observation"]
    assert observation.startswith("The tool failed: ") and "always does" in observation
    assert frames[-1].chunk_type == "answer" and frames[-1].end_of_dialog


async def test_an_error_is_the_one_last_frame(agent):
    # The one step is asked for under the answer-only schema: a tool call is refused
    # (text-completion's check), told to the model, and the iterations are spent.
    agent.replies.react["Never done"] = [step("Again.", "add", a=1, b=1)]
    frames = await agent.frames(question="Never done", group=["math"], max_iterations=1,
                                session_id="err")
    *steps, last = frames
    assert sequence(steps) == ["thought", "thought.", "observation."]
    assert steps[-1].content.startswith("Your reply could not be used: ")
    assert (last.chunk_type, last.message_type, last.end_of_message, last.end_of_dialog) == (
        "error", "error", True, True)
    assert last.error.type == "agent-error"
    assert last.content == last.error.message == \
        "no final answer within max_iterations (1)"
    assert await saved_turns(agent, "trustgraph", "err") == []


async def test_a_session_remembers_its_turns_for_its_own_user(agent):
    agent.replies.react["Capital of France"] = [final("Known.", "Paris.")]
    agent.replies.react["And its river"] = [final("From before.", "The Seine.")]
    await agent.frames(question="Capital of France?", user="ann", session_id="trip")
    await agent.frames(question="And its river?", user="ann", session_id="trip")
    assert "Earlier question: Capital of France?\nEarlier answer: Paris." in \
        agent.llm.prompts[-1]
    await agent.frames(question="And its river?", user="bob", session_id="trip")
    assert "Capital of France" not in agent.llm.prompts[-1]
    assert [t.question for t in await saved_turns(agent, "ann", "trip")] == [
        "Capital of France?", "And its river?"]
    assert [t.question for t in await saved_turns(agent, "bob", "trip")] == ["And its river?"]


async def test_cancel_mid_thought_stops_the_llm_and_saves_nothing(agent):
    agent.replies.react["Think slowly"] = [final("one two three four five six seven "
                                                 "eight nine ten", "Done.")]
    agent.llm.disconnected.clear()
    request = AgentRequest(question="Think slowly [delay=0.2]", streaming=True,
                           session_id="slow")
    async with aclosing(agent.agent.frames(request)) as batches:
        async for batch in batches:
            if any(decode(AgentResponse, data).content for data, _ in batch):
                break  # the first thought words: now go away
    async with asyncio.timeout(5):
        await agent.llm.disconnected.wait()
    assert await saved_turns(agent, "trustgraph", "slow") == []


async def test_cancel_during_an_mcp_call_stops_the_call(agent):
    agent.replies.react["Wait for"] = [step("Wait.", "wait", seconds=30),
                                       final("Waited.", "Done.")]
    request = AgentRequest(question="Wait for it", streaming=True, group=["slow"])
    async with aclosing(agent.agent.frames(request)) as batches:
        async for batch in batches:
            if any(decode(AgentResponse, data).chunk_type == "action" for data, _ in batch):
                break
        async with asyncio.timeout(5):
            await agent.mcp.waiting.wait()  # the call reached the server: now go away
    async with asyncio.timeout(5):
        await agent.mcp.cancelled.wait()


async def test_cancel_during_a_graph_rag_call_reaches_graph_rag(agent):
    question = "Slow facts [tokens=200 delay=0.05]"
    agent.replies.react["Look slowly"] = [step("Look.", "knowledge-query", question=question),
                                          final("Found.", "Done.")]
    request = AgentRequest(question="Look slowly", streaming=True)
    async with aclosing(agent.agent.frames(request)) as batches:
        async for batch in batches:
            if any(decode(AgentResponse, data).chunk_type == "action" for data, _ in batch):
                break
        async with asyncio.timeout(5):  # GraphRAG has the question: now go away
            while not any(r.query == question for r in agent.rag.requests):
                await asyncio.sleep(0.01)
    await agent.rag.wait_cancelled(question, 5)
