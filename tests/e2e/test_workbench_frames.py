"""The workbench page against a scripted gateway: the agent's and LazyRAG's frames
exactly as docs/protocol.md §2 spells them, every kind of agent step included, and
LazyRAG before it runs in the default stack (test_workbench.py asks each service
the stack runs for real).

A small aiohttp app serves the real page (``add_page_routes``) and a websocket that
answers each service with fixed PROTOCOL frames, and records what the page sent.
No broker, no stack: a few seconds.
"""
import asyncio
import json
import re
import threading
from contextlib import contextmanager

import pytest
from aiohttp import web

from tests.support.browser import chromium, missing
from tests.support.page import add_page_routes
from tests.support.workbench import WorkbenchPage

pytestmark = [pytest.mark.skipif(missing() is not None, reason=str(missing())),
              pytest.mark.timeout(60)]

AGENT = [  # (chunk_type, content, end_of_message)
    ("thought", "I should look ", False), ("thought", "this up.", True),
    ("action", "knowledge-query: moon walkers", True),
    ("observation", "Armstrong and Aldrin", True),
    ("answer", "Neil **Armstrong** ", False), ("answer", "and Buzz Aldrin.", True),
]
SOURCE = {"id": "apollo.txt/c0", "document_id": "apollo.txt", "title": "Apollo",
          "text": "Neil Armstrong and Buzz Aldrin walked on the Moon.", "distance": 0.2}
TRIPLE = {"s": {"t": "i", "i": "urn:tg:entity:neil-armstrong"},
          "p": {"t": "i", "i": "urn:tg:rel:walked-on"}, "o": {"t": "i", "i": "urn:tg:entity:moon"}}


def agent_frames() -> list[dict]:
    frames = [{"chunk_type": kind, "message_type": kind, "content": content,
               "end_of_message": end, "end_of_dialog": False} for kind, content, end in AGENT]
    frames[-1]["end_of_dialog"] = True
    return frames


def lazy_frames() -> list[dict]:
    return [
        {"message_type": "metadata", "sources": [SOURCE, {**SOURCE, **TRIPLE}],
         "optimized_query": None, "subqueries": [], "end_of_stream": False},
        {"message_type": "chunk", "chunk": "Armstrong ", "end_of_stream": False},
        {"message_type": "chunk", "chunk": "walked first.", "end_of_stream": False},
        {"message_type": "chunk", "chunk": "", "end_of_stream": True, "end_of_session": True,
         "sources": [SOURCE], "in_token": 40, "out_token": 3, "model": "fake",
         "entities": ["Neil Armstrong", "Moon"], "relationships": [TRIPLE], "communities": [],
         "confidence": 0.42, "missing_info": ["the date of the landing"],
         "generation_time_ms": 12},
    ]


class ScriptedGateway:
    """The page's files plus a websocket answering from the scripts above."""

    def __init__(self) -> None:
        self.sent: list[dict] = []  # every request frame the page sent

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/api/v1/socket", self.socket)
        app.router.add_get("/api/v1/lazy-rag/status", self.lazy_status)
        add_page_routes(app)
        return app

    @staticmethod
    async def lazy_status(request: web.Request) -> web.Response:
        return web.json_response({"data": {"enabled": True},  # the gateway's envelope
                                  "meta": {"requestId": "1", "timestamp": "now"}})

    async def socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for message in ws:
            frame = json.loads(message.data)
            if frame.get("type") == "auth":
                await ws.send_json({"type": "auth-ok", "default_workspace": "default"})
            elif frame.get("type") is None:
                self.sent.append(frame)
                for reply in self.answer(frame):
                    await ws.send_json(reply)
        return ws

    def answer(self, frame: dict) -> list[dict]:
        envelope = {"id": frame["id"]}
        if frame["request"].get("streaming") == "probe":  # the page asking what runs
            return [{**envelope, "error": {"type": "bad-request", "message": "streaming: "
                                           "not a boolean"}, "complete": True}]
        if frame["service"] == "document-rag":  # known to the gateway, nobody serving
            return [{**envelope, "complete": True, "response": {"error": {
                "type": "no-service", "message": "no document-rag processor took the request"}}}]
        frames = agent_frames() if frame["service"] == "agent" else lazy_frames()
        return [{**envelope, "response": record, "complete": i == len(frames) - 1}
                for i, record in enumerate(frames)]


@contextmanager
def serving(gateway: ScriptedGateway):
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start() -> tuple[web.AppRunner, int]:
        runner = web.AppRunner(gateway.app())
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return runner, runner.addresses[0][1]

    runner, port = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


@pytest.fixture(scope="module")
def gateway():
    return ScriptedGateway()


@pytest.fixture(scope="module")
def page(gateway):
    with serving(gateway) as url, chromium() as driver:
        page = WorkbenchPage(driver, url)
        page.open()
        yield page


def test_agent_steps_are_collapsible_and_above_the_answer(page, gateway):
    turn = page.ask("agent", "Who walked on the Moon?")
    assert turn["state"] == "done", turn
    assert turn["answer"] == "Neil Armstrong and Buzz Aldrin."
    assert "<strong>Armstrong</strong>" in turn["answer_html"]
    steps = page.js("""return [...document.querySelector('#history').lastElementChild
        .querySelectorAll('.steps details')].map(d => [d.className, d.open,
        d.querySelector('summary').textContent, d.querySelector('.step-body').textContent])""")
    assert steps == [["step step-thought", False, "Thought", "I should look this up."],
                     ["step step-action", False, "Action", "knowledge-query: moon walkers"],
                     ["step step-observation", False, "Observation", "Armstrong and Aldrin"]]
    order = page.js("""const t = document.querySelector('#history').lastElementChild;
        return t.querySelector('.steps').compareDocumentPosition(t.querySelector('.answer'))""")
    assert order & 4  # the answer follows the steps


def test_agent_turns_share_a_session_until_a_new_conversation(page, gateway):
    page.ask("agent", "And who stayed in orbit?")
    sessions = [f["request"]["session_id"] for f in gateway.sent
                if f["service"] == "agent" and f["request"]["streaming"] is True]
    assert len(sessions) == 2 and sessions[0] == sessions[1]
    page.find("#new-conversation").click()
    assert page.all("#history .turn") == []
    page.ask("agent", "A new question")
    assert gateway.sent[-1]["request"]["session_id"] != sessions[0]
    agent = gateway.sent[-1]
    assert agent["request"]["question"] == "A new question"
    assert agent["request"]["streaming"] is True
    # Each question asks for its trace (its answer opens it), each in a trace of its own.
    asked = [f["traceparent"] for f in gateway.sent if f["service"] == "agent"
             and f["request"]["streaming"] is True]
    assert all(re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-01", t) for t in asked), asked
    assert len({t.split("-")[1] for t in asked}) == len(asked) == 3
    probe = [f for f in gateway.sent if f["request"].get("streaming") == "probe"]
    assert probe and all("traceparent" not in f for f in probe)


def test_lazy_shows_confidence_and_what_is_missing_under_the_answer(page, gateway):
    turn = page.ask("lazy", "Who walked first?")
    assert turn["state"] == "done" and turn["answer"] == "Armstrong walked first.", turn
    assert turn["seen"]["sourcesAtFirstToken"] == 2
    assert any("neil armstrong – walked on – moon" in s for s in turn["sources"])
    lazy = page.js("""const t = document.querySelector('#history').lastElementChild;
        return {meter: t.querySelector('.lazy meter').value,
                text: t.querySelector('.lazy').innerText,
                after: t.querySelector('.answer').compareDocumentPosition(
                    t.querySelector('.lazy'))}""")
    assert lazy["meter"] == 42 and "42 %" in lazy["text"]
    assert "the date of the landing" in lazy["text"] and lazy["after"] & 4
    request = gateway.sent[-1]["request"]
    assert "use_communities" in request
    # limits left empty are the flow's own: left out, so the flow's parameters apply
    assert not {"max_entities", "max_hops"} & request.keys()
    assert "tokens 40 in / 3 out (fake)" in turn["meta"]


def test_a_mode_whose_processor_is_missing_is_switched_off(page):
    turn = page.ask("document", "Anything?")
    assert turn["state"] == "error" and "no-service" in turn["error"]
    radio = page.find("#ask-form input[name=mode][value=document]")
    assert not radio.is_enabled()
    assert "no document-rag processor is running" in page.text("#mode-note")
