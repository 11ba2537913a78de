"""Prompts end to end: ``tg-start`` running config, prompt, text-completion and the
gateway, the LLM a local OpenAI-format server.

* a text template's answer streams through the gateway's websocket;
* a JSON template answers once with a checked object, even with ``streaming: true``;
* a template edited with ``tg-set-prompt`` is used by the next requests, no restart.

The scripted server answers ``tok0 tok1 ...``; for JSON templates the server here
answers a fixed text instead when the prompt holds one of ``ANSWERS``' markers.
"""
import asyncio
import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from tests.support.openai_server import OpenAiServer, Script, expected_text
from tests.support.stack import Stack
from tests.support.waiting import eventually
from trustgraph.api import AsyncTrustGraph, TrustGraphError

BIN = Path(sys.executable).parent
DEADLINE = 30.0
KNOWLEDGE = [{"s": "Acme", "p": "founded by", "o": "Ann"}]
SUBQUESTIONS = ["Who founded Acme?", "When was Acme founded?"]
ANSWERS = {  # marker in the prompt -> the model's whole answer
    "<<decompose>>": "Here are the sub-questions:\n```json\n" + json.dumps(SUBQUESTIONS)
                     + "\n```",
    "<<ramble>>": "I would rather not split this question.",
}


class MarkedAnswers(OpenAiServer):
    """The OpenAI-format server, answering ``ANSWERS[marker]`` to a prompt that holds
    a marker (streamed a word at a time, or whole), and the script otherwise."""

    async def handle(self, request: web.Request, body: dict | None = None
                     ) -> web.StreamResponse:
        body = body if body is not None else await request.json()
        prompt = self.prompt_text(body)
        answer = next((text for marker, text in ANSWERS.items() if marker in prompt), None)
        if answer is None:
            return await super().handle(request, body)
        self.stats.requests += 1
        words = answer.split(" ")
        script = Script(tokens=len(words))
        if not self.wants_stream(body):
            return self.completion(answer, script)
        response = await self.open_stream(request, body)
        for n, word in enumerate(words):
            await self.write_token(response, word if n == len(words) - 1 else word + " ")
        await self.write_end(response, body, script)
        return response


@contextmanager
def server_thread() -> Iterator[MarkedAnswers]:
    """The server on a loop of its own, so it answers while the test blocks."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="marked-answers", daemon=True)
    thread.start()

    async def started() -> MarkedAnswers:
        return await MarkedAnswers().start()

    server = asyncio.run_coroutine_threadsafe(started(), loop).result(10)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@pytest.fixture(scope="module")
def llm():
    with server_thread() as server:
        yield server


@pytest.fixture(scope="module")
def stack(llm):
    with Stack(env={"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "test",
                    "TG_REQUEST_TIMEOUT": "10"},
               processors=["config", "prompt", "text-completion", "gateway"]) as stack:
        yield stack


async def socket_frames(stack: Stack, request: dict, service: str = "prompt") -> list[dict]:
    """Every frame answering one request sent on a fresh websocket, up to the complete one."""
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(stack.websocket_url) as ws:
            await ws.send_json({"id": "e2e", "service": service, "flow": "default",
                                "request": request})
            frames: list[dict] = []
            async with asyncio.timeout(DEADLINE):
                while not frames or not frames[-1]["complete"]:
                    frames.append(await ws.receive_json())
    assert all(frame["id"] == "e2e" for frame in frames)
    return frames


async def cli(command: str, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        str(BIN / command), *args, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(process.communicate(), DEADLINE)
    return process.returncode, stdout.decode(), stderr.decode()


async def test_text_prompt_streams_through_the_gateway(stack):
    frames = await socket_frames(stack, {
        "id": "kg-prompt", "streaming": True,
        "variables": {"query": "Who founded Acme? [tokens=40 delay=0.002]",
                      "knowledge": KNOWLEDGE}})
    *deltas, final = frames
    assert len(deltas) > 1 and not any(frame["complete"] for frame in deltas)
    assert all(frame["response"]["end_of_stream"] is False for frame in deltas)
    assert "".join(frame["response"]["text"] for frame in deltas) == expected_text(40)
    assert final["complete"] and final["response"] == {
        "text": "", "end_of_stream": True, "in_token": 11, "out_token": 40,
        "model": "fake-gpt"}


async def test_json_prompt_answers_one_checked_object_when_streaming(stack):
    [frame] = await socket_frames(stack, {
        "id": "query-decompose", "streaming": True,
        "variables": {"query": "Who founded Acme, and when? <<decompose>>"}})
    assert frame["complete"] and frame["response"]["end_of_stream"]
    assert "text" not in frame["response"] and frame["response"]["model"] == "fake-gpt"
    assert json.loads(frame["response"]["object"]) == SUBQUESTIONS

    [failed] = await socket_frames(stack, {
        "id": "query-decompose", "streaming": True,
        "variables": {"query": "Split this <<ramble>>"}})
    error = failed["response"]["error"]
    assert failed["complete"] and error["type"] == "prompt-error"
    assert "for template 'query-decompose' is not valid JSON" in error["message"]


async def test_cli_prints_a_json_answer_as_indented_json(stack):
    code, stdout, stderr = await cli("tg-invoke-prompt", "-u", stack.gateway_url,
                                     "--show-usage", "query-decompose",
                                     "query=Who and when? <<decompose>>", "max_subqueries:=2")
    words = len(ANSWERS["<<decompose>>"].split(" "))  # the server's output tokens
    assert (code, stdout) == (0, json.dumps(SUBQUESTIONS, indent=2) + "\n")
    assert stderr == f"Input tokens: 11  Output tokens: {words}  Model: fake-gpt\n"


async def answer_of(client: AsyncTrustGraph, id: str) -> str:
    try:
        return await client.prompt(id, {"name": "Ann"})
    except TrustGraphError as error:
        return f"{error.type}: {error.message}"


async def test_edited_template_is_used_without_a_restart(stack):
    prompt_pid = stack.pid("prompt")
    async with AsyncTrustGraph(stack.gateway_url) as client:
        assert (await answer_of(client, "greeting")).startswith(
            "not-found: no prompt template 'greeting'")
        for tokens in (3, 7):
            code, stdout, stderr = await cli(
                "tg-set-prompt", "-u", stack.gateway_url, "--id", "greeting",
                "--system", "You greet people.",
                "--prompt", f"Greet {{{{ name }}}} [tokens={tokens}]")
            assert (code, stdout, stderr) == (0, "", "")
            # The edit reaches the prompt service as a config notification, a moment
            # after tg-set-prompt returns.
            await eventually(lambda: answer_of(client, "greeting"), "the edited template",
                             accept=lambda answer, tokens=tokens: answer == expected_text(tokens),
                             timeout=10.0)
    code, stdout, _ = await cli("tg-invoke-prompt", "-u", stack.gateway_url, "greeting",
                                "name=Bo")
    assert (code, stdout) == (0, expected_text(7) + "\n")
    assert stack.pid("prompt") == prompt_pid
