"""tg-invoke-graph-rag and tg-invoke-document-rag against a real gateway and broker in
front of scripted RAG services (tests/support/scripted_rag.py). The commands' ``main``
runs in this process (tests/support/cli.py); Ctrl-C is tested on the installed
console script, in a process of its own."""
import asyncio
import signal
import sys
import uuid
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.cli import tg_command
from tests.support.scripted_rag import (
    MODEL,
    ScriptedRagGateway,
    expected_text,
    scripted_rag_gateway,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

BIN = Path(sys.executable).parent
DEADLINE = 30.0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rig(broker):
    async with scripted_rag_gateway(broker.url) as stack:
        yield stack


async def start(rig: ScriptedRagGateway, command: str, *args: str
                ) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        str(BIN / command), "-u", rig.url, "-f", rig.flow, *args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)


async def tg(rig: ScriptedRagGateway, command: str, *args: str) -> tuple[int, str, str]:
    return await tg_command(command, "-u", rig.url, "-f", rig.flow, *args, timeout=DEADLINE)


@pytest.mark.parametrize("command", ["tg-invoke-graph-rag", "tg-invoke-document-rag"])
@pytest.mark.parametrize("how", [[], ["--streaming"], ["--no-streaming"]])
async def test_prints_the_answer(rig, command, how):
    code, out, err = await tg(rig, command, "-q", "[tokens=40]", *how)
    assert (code, out, err) == (0, expected_text(40) + "\n", "")
    assert rig.rag.requests[-1].streaming is (how != ["--no-streaming"])


@pytest.mark.parametrize("how", [[], ["--no-streaming"]])
async def test_show_sources_and_usage(rig, how):
    code, out, err = await tg(rig, "tg-invoke-graph-rag", "-q", "[tokens=3]", "-U", "ann",
                              "-C", "notes", "--optimize-query", "--subqueries",
                              "--show-sources", "--show-usage", *how)
    assert code == 0, err
    assert out == (
        "Rewritten question: rewritten: [tokens=3]\n"
        "Sub-question: [tokens=3] (part 1)\n"
        "Sub-question: [tokens=3] (part 2)\n"
        "Sources (3):\n"
        "[1] notes document 1 (doc1) 0.100: text 1 of notes\n"
        "[2] notes document 2 (doc2) 0.200: text 2 of notes\n"
        "[3] doc1 0.300: alpha knows beta\n"
        "\n" + expected_text(3) + "\n")
    assert err == f"Input tokens: 11  Output tokens: 3  Model: {MODEL}\n"


async def test_graph_limits_and_scope_reach_the_service(rig):
    code, _, err = await tg(rig, "tg-invoke-graph-rag", "-q", "q", "-e", "3",
                            "--triple-limit", "4", "-s", "5", "-p", "1", "-U", "u", "-C", "c")
    assert code == 0, err
    request = rig.rag.requests[-1]
    assert (request.entity_limit, request.triple_limit, request.max_subgraph_size,
            request.max_path_length, request.user, request.collection) == (3, 4, 5, 1, "u", "c")
    assert (request.optimize_query, request.subqueries) == (False, False)


async def test_document_limit_reaches_the_service(rig):
    code, _, err = await tg(rig, "tg-invoke-document-rag", "-q", "q", "-d", "2")
    assert code == 0, err
    assert rig.rag.requests[-1].doc_limit == 2


async def test_failure_mid_answer_keeps_the_text_and_reports_one_line(rig):
    code, out, err = await tg(rig, "tg-invoke-graph-rag", "-q", "[tokens=9 fail_after=4]")
    assert code == 1
    assert out == expected_text(4) + "\n"
    assert err == "tg-invoke-graph-rag: graph-rag-error: scripted failure\n"


@pytest.mark.parametrize("args, complaint", [
    ([], "-q/--question"),
    (["-q", "q", "-e", "0"], "less than 1"),
    (["-q", "q", "-p", "two"], "not a whole number"),
    (["-q", "q", "--streaming", "--no-streaming"], "not allowed with"),
])
async def test_bad_arguments_exit_2(rig, args, complaint):
    code, out, err = await tg(rig, "tg-invoke-graph-rag", *args)
    assert code == 2 and out == "" and complaint in err


async def test_ctrl_c_stops_the_answer(rig):
    query = f"[tokens=5000 delay=0.01] {uuid.uuid4().hex}"
    process = await start(rig, "tg-invoke-document-rag", "-q", query)
    try:
        first = await asyncio.wait_for(process.stdout.read(4), DEADLINE)
        assert first == b"tok0"
        process.send_signal(signal.SIGINT)
        await asyncio.wait_for(process.communicate(), DEADLINE)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 130
    await rig.rag.wait_cancelled(query, 2.0)
