"""``tg-invoke-llm`` run as a subprocess (the installed console script) against an
in-process stack: broker, text-completion processor, gateway, local LLM server."""
import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.support.inprocess import inprocess_stack
from tests.support.openai_server import expected_text

TG_INVOKE_LLM = str(Path(sys.executable).parent / "tg-invoke-llm")
DEADLINE = 30.0  # a subprocess start costs ~0.5 s; this only bounds a hang
TOKEN = "cli-token"


@pytest.fixture
async def gateway(broker, openai_server):
    async with inprocess_stack(broker.url, openai_server.base_url) as url:
        yield url


def environment(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRUSTGRAPH_")}
    return {**env, **values}


async def start(*args: str, **env: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        TG_INVOKE_LLM, *args, env=environment(**env), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def tg_invoke_llm(*args: str, **env: str) -> tuple[int, str, str]:
    process = await start(*args, **env)
    stdout, stderr = await asyncio.wait_for(process.communicate(), DEADLINE)
    return process.returncode, stdout.decode(), stderr.decode()


async def test_streams_the_answer_to_stdout(gateway):
    code, stdout, stderr = await tg_invoke_llm("-u", gateway, "be brief", "[tokens=50]")
    assert (code, stdout, stderr) == (0, expected_text(50) + "\n", "")


async def test_prints_tokens_as_they_arrive_and_ctrl_c_cancels(gateway, openai_server):
    process = await start("[tokens=1000 delay=0.01]", TRUSTGRAPH_URL=gateway)
    first = await asyncio.wait_for(process.stdout.readexactly(5), DEADLINE)
    assert first == b"tok0 "
    assert openai_server.stats.open_streams == 1  # the LLM is still answering
    process.send_signal(signal.SIGINT)
    stdout, stderr = await asyncio.wait_for(process.communicate(), DEADLINE)
    assert process.returncode == 130
    assert stderr == b""  # quiet: no traceback
    await asyncio.wait_for(openai_server.disconnected.wait(), DEADLINE)
    assert len(first + stdout) < len(expected_text(1000))


async def test_no_streaming_and_show_usage(gateway):
    code, stdout, stderr = await tg_invoke_llm("-u", gateway, "--no-streaming",
                                               "--show-usage", "sys", "[tokens=5]")
    assert (code, stdout) == (0, expected_text(5) + "\n")
    assert stderr == "Input tokens: 11  Output tokens: 5  Model: fake-gpt\n"


async def test_show_usage_when_streaming(gateway):
    code, stdout, stderr = await tg_invoke_llm("-u", gateway, "--show-usage", "[tokens=8]")
    assert (code, stdout) == (0, expected_text(8) + "\n")
    assert stderr == "Input tokens: 11  Output tokens: 8  Model: fake-gpt\n"


async def test_provider_error_is_one_line_on_stderr(gateway):
    code, stdout, stderr = await tg_invoke_llm("-u", gateway, "[tokens=5 fail_after=2]")
    assert code == 1
    assert stdout == expected_text(2) + "\n"
    assert stderr.count("\n") == 1
    assert stderr.startswith("tg-invoke-llm: llm-error: ") and "scripted failure" in stderr


async def test_unreachable_gateway_is_one_line_on_stderr():
    code, stdout, stderr = await tg_invoke_llm("-u", "http://127.0.0.1:1/", "hello")
    assert (code, stdout) == (1, "")
    assert stderr == ("tg-invoke-llm: connection: cannot connect to the gateway at "
                      "http://127.0.0.1:1/: connection refused (is the gateway running, "
                      "on this host and port?)\n")


async def test_unknown_flow_is_one_line_on_stderr(gateway):
    code, _, stderr = await tg_invoke_llm("-u", gateway, "-f", "nope", "hello")
    assert code == 1
    assert stderr.startswith("tg-invoke-llm: unknown-flow: unknown flow 'nope'")
    assert stderr.count("\n") == 1


async def test_token_from_the_environment(broker, openai_server):
    async with inprocess_stack(broker.url, openai_server.base_url, token=TOKEN) as url:
        good = await tg_invoke_llm("[tokens=3]", TRUSTGRAPH_URL=url, TRUSTGRAPH_TOKEN=TOKEN)
        wrong = await tg_invoke_llm("-t", "wrong", "[tokens=3]", TRUSTGRAPH_URL=url)
    assert good == (0, expected_text(3) + "\n", "")
    assert wrong == (1, "", f"tg-invoke-llm: auth: the gateway at {url} refused the token "
                            "(auth failure)\n")


async def test_prompt_from_stdin(gateway):
    process = await asyncio.create_subprocess_exec(
        TG_INVOKE_LLM, "-u", gateway, "--no-streaming", env=environment(),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(process.communicate(b"[tokens=4]\n"), DEADLINE)
    assert (process.returncode, stdout.decode(), stderr) == (0, expected_text(4) + "\n", b"")
