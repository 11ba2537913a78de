"""A process group under ``tg-start`` (the default stack's ``prompt+text-completion``):
one child process serving both, through the gateway, restarted as one after SIGKILL."""
import asyncio
import uuid

import aiohttp
import pytest

from tests.support.openai_server import expected_text
from tests.support.stack import Stack, openai_server_thread
from tests.support.waiting import eventually
from trustgraph.run.rundir import alive

GROUP = "prompt+text-completion"


async def ask(stack: Stack, service: str, request: dict, timeout: float = 10.0
              ) -> tuple[str, dict | None]:
    """One streamed request over the websocket: (text, error or None)."""
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(stack.websocket_url) as ws:
            request_id = uuid.uuid4().hex
            await ws.send_json({"id": request_id, "service": service, "flow": "default",
                                "request": request})
            text = []
            async with asyncio.timeout(timeout):
                while True:
                    frame = await ws.receive_json()
                    response = frame.get("response") or {}
                    if error := frame.get("error") or response.get("error"):
                        return "".join(text), error
                    text.append(response.get("text") or response.get("response") or "")
                    if frame["complete"]:
                        return "".join(text), None


def prompt(tokens: int) -> dict:
    return {"id": "kg-prompt", "streaming": True,
            "variables": {"query": f"[tokens={tokens}]", "knowledge": []}}


async def answers_within(stack: Stack, deadline: float) -> None:
    async def answers() -> bool:
        try:
            return await ask(stack, "prompt", prompt(4), timeout=2.0) == (expected_text(4),
                                                                           None)
        except (aiohttp.ClientError, TimeoutError):
            return False
    await eventually(answers, "the group to answer again", timeout=deadline, every=0.1)


@pytest.fixture(scope="module")
def stack():
    with openai_server_thread() as llm, Stack(
            env={"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "test",
                 "TG_REQUEST_TIMEOUT": "5"},
            processors=["config", GROUP, "gateway"]) as stack:
        yield stack


async def test_the_group_is_one_child_serving_both_in_process(stack):
    assert set(stack.pids()) == {"tg-start", "broker", "config", GROUP, "gateway"}
    assert stack.serving(GROUP)
    with open(f"/proc/{stack.pid(GROUP)}/cmdline", "rb") as cmdline:
        assert cmdline.read().split(b"\0")[-2] == GROUP.encode()
    assert "in-process services: prompt:default, text-completion:default" in stack.log()
    assert await ask(stack, "prompt", prompt(12)) == (expected_text(12), None)
    # text-completion still serves the bus too (the gateway's own requests)
    assert await ask(stack, "text-completion", {"prompt": "[tokens=3]", "streaming": True}) \
        == (expected_text(3), None)


async def test_a_killed_group_is_restarted_as_one(stack):
    old = stack.kill(GROUP)
    new = await asyncio.to_thread(stack.wait_restarted, GROUP, old)
    assert new != old and not alive(old)
    await answers_within(stack, deadline=15)
    assert f"{GROUP} restarted, pid {new}" in stack.log()
