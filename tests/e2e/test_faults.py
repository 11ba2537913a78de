"""Faults on the default stack (issue 13): every request ends, with its answer or an
error naming what failed, within its timeout, on the websocket and on REST NDJSON.

One ``tg-start`` default stack serves the whole module (TG_REQUEST_TIMEOUT 5 s); the
local OpenAI-format server's behaviour is switched per test: an error mid-stream, a
stall after the first token, malformed JSON mid-stream, 429 twice then an answer.
Then a processor is SIGKILLed mid-stream, and the broker is, each in one test; the
stack must answer again afterwards (tg-start restarts what was killed).

Each test sends a streaming text-completion over the websocket and a streaming
``/api/v1/query`` (document-rag: the LLM answers through prompt and text-completion)
at once, and waits for both to end.
"""
import asyncio
import json
import re
import time
import uuid
from dataclasses import dataclass

import aiohttp
import pytest

from tests.support.openai_server import Script, expected_text
from tests.support.stack import Stack, openai_server_thread
from tests.support.waiting import eventually
from trustgraph.run.registry import DEFAULT_STACK

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180)]

TIMEOUT = 5.0  # TG_REQUEST_TIMEOUT: the longest silence before a request fails
# How long past its timeout a request may take to end on a busy 2-core machine.
SLACK = 10.0
# The process that serves text-completion and document-rag in the default stack.
ANSWERING = next(entry for entry in DEFAULT_STACK if "text-completion" in entry.split("+"))
LONG = Script(tokens=400, delay=0.02)  # ~8 s of tokens: still streaming at a kill


@dataclass
class Outcome:
    text: str
    error: dict | None  # {"type"?, "message"} as the client was told
    seconds: float


@pytest.fixture(scope="module")
def llm():
    with openai_server_thread() as server:
        yield server


@pytest.fixture(scope="module")
def stack(llm):
    with Stack(env={"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "test",
                    "TG_LLM": "openai", "TG_REQUEST_TIMEOUT": str(TIMEOUT)},
               startup_timeout=120) as stack:
        yield stack


@pytest.fixture
def script(llm):
    """Set the LLM server's behaviour for one test; the default afterwards."""
    def set_script(new: Script) -> None:
        llm.script = new
        llm.stats.statuses_sent = 0
    yield set_script
    set_script(Script())


async def over_websocket(stack: Stack, started: asyncio.Event | None = None) -> Outcome:
    """One streaming text-completion; ``started`` is set at its first token."""
    request_id, began, text = uuid.uuid4().hex, time.monotonic(), []
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(stack.websocket_url) as ws:
            await ws.send_json({"id": request_id, "service": "text-completion",
                                "request": {"system": "", "prompt": "hello",
                                            "streaming": True}})
            async for message in ws:
                frame = json.loads(message.data)
                response = frame.get("response") or {}
                error = frame.get("error") or response.get("error")
                text.append(response.get("response") or "")
                if started is not None and text[-1]:
                    started.set()
                if error or frame["complete"]:
                    return Outcome("".join(text), error, time.monotonic() - began)
    return Outcome("".join(text), {"message": "socket closed"}, time.monotonic() - began)


async def over_rest(stack: Stack, started: asyncio.Event | None = None) -> Outcome:
    """One streaming ``/api/v1/query`` (document-rag); ``started`` at its first delta."""
    began, text = time.monotonic(), []
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{stack.gateway_url}api/v1/query",
                                json={"query": "hello", "stream": True}) as response:
            if response.status != 200:  # failed before its first line
                body = await response.json()
                return Outcome("", body.get("error", body), time.monotonic() - began)
            async for line in response.content:
                record = json.loads(line)
                if record["type"] == "content":
                    text.append(record["delta"])
                    if started is not None:
                        started.set()
                elif record["type"] == "error":
                    return Outcome("".join(text), record, time.monotonic() - began)
                elif record["type"] == "done":
                    return Outcome("".join(text), None, time.monotonic() - began)
    return Outcome("".join(text), {"message": "stream ended without done"},
                   time.monotonic() - began)


async def both(stack: Stack, limit: float = TIMEOUT + SLACK) -> tuple[Outcome, Outcome]:
    """Both requests at once, each required to end within ``limit`` seconds."""
    async with asyncio.timeout(limit):
        return await asyncio.gather(over_websocket(stack), over_rest(stack))


async def answers_again(stack: Stack, deadline: float) -> None:
    async def answered() -> bool:
        try:
            socket, rest = await both(stack, limit=TIMEOUT + 2)
        except (aiohttp.ClientError, TimeoutError):
            return False
        return socket.error is None and rest.error is None
    await eventually(answered, "the stack to answer again", timeout=deadline, every=0.2)


async def test_an_llm_error_mid_stream_ends_both_with_that_error(stack, script):
    script(Script(tokens=20, fail_after=3))
    socket, rest = await both(stack)
    assert socket.text == expected_text(3)  # what came before the error, then the error
    assert socket.error["type"] == "llm-error"
    assert "scripted failure" in socket.error["message"]
    assert rest.text == expected_text(3)
    assert "scripted failure" in rest.error["message"]


async def test_an_llm_that_stalls_after_its_first_token_times_out_saying_so(stack, script):
    script(Script(tokens=5, delay=3600))
    socket, rest = await both(stack)
    assert socket.text == rest.text == expected_text(1)
    assert socket.error == {"type": "timeout", "message": "text-completion on flow default "
                                                          f"sent nothing for {TIMEOUT:g} s"}
    # The gateway's wait for document-rag and document-rag's own wait for prompt run
    # out together; whichever is first, the message names the part that went quiet.
    assert re.fullmatch(r"(document-rag|answering \(document-prompt\) failed: prompt) "
                        rf"on flow default sent nothing for {TIMEOUT:g} s",
                        rest.error["message"]), rest.error
    for outcome in (socket, rest):
        assert TIMEOUT <= outcome.seconds < TIMEOUT + SLACK


async def test_malformed_json_mid_stream_fails_at_once_naming_it(stack, script):
    script(Script(tokens=20, garble_after=2))
    socket, rest = await both(stack)
    for outcome in (socket, rest):
        assert outcome.text == expected_text(2)
        # The parse failed (not the timeout: the server holds the connection open).
        assert "LLM stream failed: an event is not JSON" in outcome.error["message"]


async def test_429_then_recovery_is_retried_into_a_whole_answer(stack, script, llm):
    script(Script(tokens=6, status=429, fail_times=2))
    socket = await asyncio.wait_for(over_websocket(stack), TIMEOUT + SLACK)
    assert (socket.text, socket.error) == (expected_text(6), None)
    assert llm.stats.statuses_sent == 2
    script(Script(tokens=6, status=429, fail_times=2))
    rest = await asyncio.wait_for(over_rest(stack), TIMEOUT + SLACK)
    assert (rest.text, rest.error) == (expected_text(6), None)
    assert llm.stats.statuses_sent == 2


async def in_flight(stack: Stack) -> tuple[asyncio.Task, asyncio.Task]:
    """Both requests started and streaming (each has had a token)."""
    socket_started, rest_started = asyncio.Event(), asyncio.Event()
    socket = asyncio.create_task(over_websocket(stack, socket_started))
    rest = asyncio.create_task(over_rest(stack, rest_started))
    async with asyncio.timeout(TIMEOUT + SLACK):
        await asyncio.gather(socket_started.wait(), rest_started.wait())
    return socket, rest


async def test_a_processor_killed_mid_stream_ends_both_with_a_timeout(stack, script):
    script(LONG)
    socket, rest = await in_flight(stack)
    old = stack.kill(ANSWERING)
    async with asyncio.timeout(TIMEOUT + SLACK):
        socket, rest = await asyncio.gather(socket, rest)
    assert socket.error["type"] == "timeout" and rest.error["error_type"] == "timeout"
    assert "text-completion on flow default sent nothing" in socket.error["message"]
    assert "document-rag on flow default sent nothing" in rest.error["message"]
    await asyncio.to_thread(stack.wait_restarted, ANSWERING, old, 60.0)
    script(Script())
    await answers_again(stack, deadline=60)


async def test_the_broker_restarted_mid_stream_ends_both_whole_or_with_an_error(
        stack, script):
    script(LONG)
    socket, rest = await in_flight(stack)
    old = stack.kill("broker")
    async with asyncio.timeout(TIMEOUT + SLACK):
        outcomes = await asyncio.gather(socket, rest)
    for outcome in outcomes:
        # Responses are numbered: a gap is an error, never an answer with holes.
        assert outcome.error is not None or outcome.text == expected_text(LONG.tokens), \
            outcome
        assert outcome.error is None or outcome.error["message"]
    print("broker killed mid-stream:", [(o.error, round(o.seconds, 2)) for o in outcomes])
    await asyncio.to_thread(stack.wait_restarted, "broker", old, 60.0)
    script(Script())
    await answers_again(stack, deadline=60)
