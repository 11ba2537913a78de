"""tg-invoke-agent and the tool commands (tg-set-tool, tg-show-tools, tg-delete-tool)
against a real gateway and broker in front of a scripted agent
(tests/support/scripted_agent.py) and the real config service.

The installed console script runs in a process of its own where that is the point
(Ctrl-C, with the answer streaming to a pipe); the other cases call the same ``main``
in this process, sparing a Python start-up each (options refused before connecting
are tests/unit/test_cli_agent.py)."""
import asyncio
import json
import signal
import sys
import uuid
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.scripted_agent import (
    MODEL,
    PROMPT_TOKENS,
    AgentStack,
    arguments,
    expected_text,
    observation,
    scripted_agent_stack,
    thought,
)
from trustgraph.api import AsyncTrustGraph
from trustgraph.cli import invoke_agent
from trustgraph.cli.tools import TOOLS
from trustgraph.schema.tool import TOOL_CONFIG_TYPE

pytestmark = pytest.mark.asyncio(loop_scope="module")

BIN = Path(sys.executable).parent
DEADLINE = 30.0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rig(broker, tmp_path_factory):
    async with scripted_agent_stack(broker.url, str(tmp_path_factory.mktemp("config"))
                                    ) as stack:
        yield stack


async def start(rig: AgentStack, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        str(BIN / "tg-invoke-agent"), "-u", rig.url, "-f", rig.flow, *args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)


@pytest.fixture
def run(rig, capsys):
    """``await run(command, *args)``: the command (a module's ``main``, or a
    function) in a thread of this process (it runs its own event loop), as ``(exit
    status, stdout, stderr)``."""
    async def run(command, *args: str) -> tuple[int, str, str]:
        flow = ("-f", rig.flow) if command is invoke_agent else ()
        argv = ["-u", rig.url, *flow, *args]
        main = getattr(command, "main", command)
        code = await asyncio.wait_for(asyncio.to_thread(main, argv), DEADLINE)
        out, err = capsys.readouterr()
        return code, out, err
    return run


def steps_shown(steps: int) -> str:
    """What -v prints before the answer (no terminal: labelled, not dimmed)."""
    return "".join(f"Thought: {''.join(thought(step))}\n"
                   f"Action: search {json.dumps(arguments(step))}\n"
                   f"Observation: {observation(step)}" for step in range(steps))


# --- tg-invoke-agent -----------------------------------------------------------------

async def test_verbose_shows_thoughts_actions_and_observations_labelled(rig, run):
    code, out, err = await run(invoke_agent, "-q", "[steps=2 tokens=3]", "-v")
    assert (code, err) == (0, "")
    assert out == steps_shown(2) + expected_text(3) + "\n"
    assert rig.agent.requests[-1].streaming is True  # the default


async def test_prints_only_the_answer_by_default(rig, run):
    assert await run(invoke_agent, "-q", "[steps=2 tokens=30]") == (
        0, expected_text(30) + "\n", "")


async def test_without_streaming_the_answer_is_printed_whole(rig, run):
    assert await run(invoke_agent, "-q", "[steps=2 tokens=7]", "--no-streaming") == (
        0, expected_text(7) + "\n", "")
    assert rig.agent.requests[-1].streaming is False
    # The steps come only with a stream: -v asks for one, and prints it whole.
    assert await run(invoke_agent, "-q", "[steps=2 tokens=7]", "--no-streaming", "-v") == (
        0, steps_shown(2) + expected_text(7) + "\n", "")


async def test_session_and_usage_on_stderr(rig, run):
    code, out, err = await run(invoke_agent, "-q", "[steps=1 tokens=2]",
                               "--session", "s-7", "--show-usage")
    assert (code, out) == (0, expected_text(2) + "\n")
    assert err == (f"Session: s-7\nInput tokens: {PROMPT_TOKENS * 2}  Output tokens: 2  "
                   f"Model: {MODEL}\n")
    assert rig.agent.requests[-1].session_id == "s-7"


async def test_a_new_session_prints_the_id_the_agent_made(rig, run):
    code, _, err = await run(invoke_agent, "-q", "q", "--session", "--no-streaming")
    assert code == 0 and err.startswith("Session: session-")
    assert rig.agent.requests[-1].session_id is None


async def test_options_reach_the_service(rig, run):
    code, _, err = await run(invoke_agent, "-q", "q", "-p", "ask", "-g", "a",
                             "-g", "b,c", "-U", "u", "-C", "c", "--max-iterations", "3")
    assert code == 0, err
    request = rig.agent.requests[-1]
    assert (request.pattern, request.group, request.user, request.collection,
            request.max_iterations) == ("ask", ["a", "b", "c"], "u", "c", 3)


async def test_failure_mid_answer_keeps_the_text_and_reports_one_line(rig, run):
    code, out, err = await run(invoke_agent, "-q", "[tokens=9 fail_after=4]")
    assert (code, out) == (1, expected_text(4) + "\n")
    assert err == "tg-invoke-agent: agent-error: scripted failure\n"


async def test_ctrl_c_stops_the_dialog(rig):
    question = f"[tokens=5000 delay=0.01] {uuid.uuid4().hex}"
    process = await start(rig, "-q", question)
    try:
        assert await asyncio.wait_for(process.stdout.read(4), DEADLINE) == b"tok0"
        process.send_signal(signal.SIGINT)
        await asyncio.wait_for(process.communicate(), DEADLINE)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 130
    await rig.agent.wait_cancelled(question, 2.0)


# --- the tool commands ---------------------------------------------------------------

async def test_set_show_and_delete_tools(rig, run):
    assert await run(TOOLS.set, "--id", "graph", "--name", "knowledge",
                    "--description", "Ask the knowledge graph.", "--kind", "knowledge-query",
                    "--group", "research", "--group", "default",
                    "--argument", "question:string:The question: whole") == (0, "", "")
    assert await run(TOOLS.set, "--id", "weather", "--description", "Weather now.",
                    "--kind", "mcp-tool", "--mcp-url", "http://127.0.0.1:9/mcp",
                    "--argument", "city") == (0, "", "")
    async with AsyncTrustGraph(rig.url) as client:
        stored = await client.config_values(TOOL_CONFIG_TYPE)
    assert stored["graph"] == {
        "name": "knowledge", "description": "Ask the knowledge graph.",
        "type": "knowledge-query", "group": ["research", "default"],
        "arguments": [{"name": "question", "type": "string",
                       "description": "The question: whole"}]}
    assert stored["weather"]["arguments"] == [{"name": "city", "type": "string",
                                               "description": ""}]

    code, out, err = await run(TOOLS.show)
    assert (code, err) == (0, "")
    assert out == ("graph\n  name: knowledge\n  kind: knowledge-query\n"
                   "  groups: research, default\n  description:\n    Ask the knowledge graph.\n"
                   "  arguments:\n    question (string): The question: whole\n\n"
                   "weather\n  name: weather\n  kind: mcp-tool\n  url: http://127.0.0.1:9/mcp\n"
                   "  description:\n    Weather now.\n  arguments:\n    city (string)\n")

    assert await run(TOOLS.delete, "--id", "weather") == (0, "", "")
    code, _, err = await run(TOOLS.delete, "--id", "weather")
    assert (code, err) == (1, "tg-delete-tool: not-found: no agent tool 'weather' "
                              "(known: graph)\n")
    assert await run(TOOLS.delete, "--id", "graph") == (0, "", "")
    assert await run(TOOLS.show) == (0, "no agent tools in config\n", "")


async def test_the_commands_are_installed():
    for command in ("tg-invoke-agent", "tg-set-tool", "tg-show-tools", "tg-delete-tool"):
        assert (BIN / command).exists(), command

