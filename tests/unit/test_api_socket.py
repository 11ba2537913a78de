"""The client transport against a tiny scripted websocket server built inline: routing,
errors, cancel on early exit, reconnect, auth, overflow. The whole stack is exercised
in tests/integration/test_api_client.py; this pins the protocol edges it cannot force."""
import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import WSMsgType, web

from trustgraph.api import AsyncTrustGraph, TrustGraph, TrustGraphError
from trustgraph.api.socket import GatewaySocket, socket_url

DEADLINE = 5.0
Answer = Callable[[web.WebSocketResponse, dict], Awaitable[None]]


class ScriptedGateway:
    """Speaks the gateway's socket protocol; ``answer(ws, frame)`` answers each request."""

    def __init__(self, answer: Answer, token: str | None = None) -> None:
        self.answer = answer
        self.token = token
        self.frames: list[dict] = []        # every frame received, in order
        self.sockets = 0
        self.cancelled: dict[str, asyncio.Event] = {}
        self.runner: web.AppRunner | None = None
        self.url = ""

    def cancel_seen(self, request_id: str) -> asyncio.Event:
        return self.cancelled.setdefault(request_id, asyncio.Event())

    async def start(self) -> "ScriptedGateway":
        app = web.Application()
        app.router.add_get("/api/v1/socket", self._socket)
        self.runner = web.AppRunner(app, handler_cancellation=True)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/"
        return self

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.sockets += 1
        tasks = []
        async for message in ws:
            if message.type != WSMsgType.TEXT:
                continue
            frame = json.loads(message.data)
            self.frames.append(frame)
            if frame.get("type") == "auth":
                ok = frame.get("token") == self.token
                await ws.send_json({"type": "auth-ok"} if ok else
                                   {"type": "auth-failed", "error": "auth failure"})
            elif frame.get("type") == "cancel":
                self.cancel_seen(frame["id"]).set()
            else:
                tasks.append(asyncio.create_task(self.answer(ws, frame)))
        for task in tasks:
            task.cancel()
        return ws

    async def stop(self) -> None:
        await self.runner.cleanup()


@pytest.fixture
async def scripted():
    gateways = []

    async def start(answer: Answer, token: str | None = None) -> ScriptedGateway:
        gateways.append(await ScriptedGateway(answer, token).start())
        return gateways[-1]

    yield start
    for gateway in gateways:
        await gateway.stop()


def respond(ws: web.WebSocketResponse, frame: dict, response: dict | None = None,
            complete: bool = True, **extra):
    body = {"id": frame["id"], "complete": complete, **extra}
    if response is not None:
        body["response"] = response
    return ws.send_json(body)


async def echo_in_three(ws, frame):
    for i in range(3):
        await respond(ws, frame, {"n": i, "echo": frame["request"]}, complete=i == 2)


async def endless(ws, frame):
    i = 0
    while True:
        await respond(ws, frame, {"response": f"t{i} "}, complete=False)
        i += 1
        await asyncio.sleep(0.001)


def test_socket_url_from_gateway_url():
    assert socket_url("http://localhost:8888/") == "ws://localhost:8888/api/v1/socket"
    assert socket_url("https://tg.example/") == "wss://tg.example/api/v1/socket"
    assert socket_url("http://h:1/prefix/") == "ws://h:1/prefix/api/v1/socket"
    assert socket_url("ws://h:1/api/v1/socket") == "ws://h:1/api/v1/socket"
    with pytest.raises(TrustGraphError) as failure:
        socket_url("localhost:8888")
    assert failure.value.type == "connection"


async def test_frames_routed_to_their_request_until_complete(scripted):
    gateway = await scripted(echo_in_three)
    async with AsyncTrustGraph(gateway.url) as tg:
        async def run(n):
            return [r async for r in tg.request("svc", {"q": n}, flow="f1")]
        results = await asyncio.gather(*(run(n) for n in range(10)))
    for n, responses in enumerate(results):
        assert responses == [{"n": i, "echo": {"q": n}} for i in range(3)]
    assert gateway.sockets == 1
    assert {f["flow"] for f in gateway.frames} == {"f1"}
    assert not gateway.cancelled  # complete requests are not cancelled


async def test_flow_none_leaves_flow_out(scripted):
    gateway = await scripted(echo_in_three)
    async with AsyncTrustGraph(gateway.url) as tg:
        [r async for r in tg.request("librarian", {}, flow=None)]
    assert "flow" not in gateway.frames[0]


@pytest.mark.parametrize("error_frame", [
    {"error": {"type": "timeout", "message": "took too long"}},
    {"response": {"error": {"type": "timeout", "message": "took too long"}}},
])
async def test_errors_raise_after_earlier_frames(scripted, error_frame):
    async def fail_second(ws, frame):
        await respond(ws, frame, {"response": "a"}, complete=False)
        await respond(ws, frame, **error_frame)

    gateway = await scripted(fail_second)
    seen = []
    async with AsyncTrustGraph(gateway.url) as tg:
        with pytest.raises(TrustGraphError) as failure:
            async for response in tg.request("svc", {}):
                seen.append(response)
    assert seen == [{"response": "a"}]
    assert (failure.value.type, failure.value.message) == ("timeout", "took too long")
    assert not gateway.cancelled


async def test_break_sends_cancel(scripted):
    gateway = await scripted(endless)
    async with AsyncTrustGraph(gateway.url) as tg:
        async for _ in tg.request("svc", {}):
            break
        await asyncio.wait_for(gateway.cancel_seen("1").wait(), DEADLINE)


async def test_cancelled_task_sends_cancel(scripted):
    gateway = await scripted(endless)
    async with AsyncTrustGraph(gateway.url) as tg:
        first = asyncio.Event()

        async def consume():
            async for _ in tg.text_completion("", "p", streaming=True):
                first.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(first.wait(), DEADLINE)
        task.cancel()
        await asyncio.wait_for(gateway.cancel_seen("1").wait(), DEADLINE)


async def test_reconnects_after_the_socket_dropped(scripted):
    async def answer_then_hang_up(ws, frame):
        await respond(ws, frame, {"response": "ok"})
        await ws.close()

    gateway = await scripted(answer_then_hang_up)
    async with AsyncTrustGraph(gateway.url) as tg:
        assert await tg.text_completion("", "one") == "ok"
        assert await tg.text_completion("", "two") == "ok"
    assert gateway.sockets == 2


async def test_dropped_socket_fails_requests_in_flight(scripted):
    async def hang_up_mid_stream(ws, frame):
        await respond(ws, frame, {"response": "a"}, complete=False)
        await ws.close()

    gateway = await scripted(hang_up_mid_stream)
    async with AsyncTrustGraph(gateway.url) as tg:
        with pytest.raises(TrustGraphError) as failure:
            [d async for d in tg.text_completion("", "p", streaming=True)]
    assert failure.value.type == "connection"
    assert "lost" in failure.value.message


async def test_unreachable_gateway_is_a_connection_error():
    async with AsyncTrustGraph("http://127.0.0.1:1/") as tg:
        with pytest.raises(TrustGraphError) as failure:
            await tg.text_completion("", "p")
    assert failure.value.type == "connection"
    assert failure.value.message.startswith(
        "cannot connect to the gateway at http://127.0.0.1:1/: connection refused")


async def test_token_sent_in_auth_frame_first(scripted):
    gateway = await scripted(echo_in_three, token="secret")
    async with AsyncTrustGraph(gateway.url, token="secret") as tg:
        assert len([r async for r in tg.request("svc", {})]) == 3
    assert gateway.frames[0] == {"type": "auth", "token": "secret"}


async def test_refused_token_is_an_auth_error(scripted):
    gateway = await scripted(echo_in_three, token="secret")
    async with AsyncTrustGraph(gateway.url, token="wrong") as tg:
        with pytest.raises(TrustGraphError) as failure:
            await tg.connect()
    assert failure.value.type == "auth"
    assert "refused the token (auth failure)" in failure.value.message


async def test_reader_not_keeping_up_fails_that_request_only(scripted):
    """Frames beyond the bound fail the request (and cancel it) instead of piling up."""
    async def flood_then_mark(ws, frame):
        if frame["request"].get("flood"):
            for i in range(20):
                await respond(ws, frame, {"response": str(i)}, complete=False)
        else:
            await respond(ws, frame, {"response": "marker"})

    gateway = await scripted(flood_then_mark)
    socket = GatewaySocket(gateway.url, max_waiting=5)
    try:
        flood = socket.request("svc", {"flood": True})
        assert await anext(flood) == {"response": "0"}
        # Frames arrive in order on the one socket: once the marker (sent after the
        # flood) is in, every flood frame has been routed.
        assert [r async for r in socket.request("svc", {})] == [{"response": "marker"}]
        received = []
        with pytest.raises(TrustGraphError) as failure:
            async for response in flood:
                received.append(response)
        assert failure.value.type == "overflow"
        # what was waiting is still delivered, in order, then the failure
        assert received == [{"response": str(i)} for i in range(1, len(received) + 1)]
        assert 4 <= len(received) <= 5
        await asyncio.wait_for(gateway.cancel_seen("1").wait(), DEADLINE)
    finally:
        await socket.close()


async def test_sync_wrapper_bridges_results_and_streams(scripted):
    gateway = await scripted(endless)

    def use_sync_client():
        with TrustGraph(gateway.url) as tg:
            deltas = []
            for delta in tg.text_completion("", "p", streaming=True):
                deltas.append(delta)
                if len(deltas) == 3:
                    break
            return deltas

    assert await asyncio.to_thread(use_sync_client) == ["t0 ", "t1 ", "t2 "]
    await asyncio.wait_for(gateway.cancel_seen("1").wait(), DEADLINE)


async def test_requests_beyond_max_inflight_wait_for_a_slot(scripted):
    running = 0
    most = 0

    async def slow_echo(ws, frame):
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.01)
        running -= 1
        await respond(ws, frame, {"response": frame["request"]["prompt"]})

    gateway = await scripted(slow_echo)
    async with AsyncTrustGraph(gateway.url, max_inflight=2) as tg:
        answers = await asyncio.gather(*(tg.text_completion("", str(n)) for n in range(6)))
    assert answers == [str(n) for n in range(6)]
    assert most == 2


async def test_sync_bridge_stops_a_pull_it_gave_up_on():
    """What Ctrl-C in a blocking loop leads to: the pending pull is cancelled on the loop
    and the stream closed, so its request would be cancelled."""
    from trustgraph.api.sync_client import _Puller

    closed = asyncio.Event()

    async def source():
        try:
            yield "first"
            await asyncio.Event().wait()  # the next item never comes
            yield "never"
        finally:
            closed.set()

    puller = _Puller(source())  # each pull is a task of its own, as the bridge runs it
    assert await asyncio.create_task(puller.next()) == "first"
    pending = asyncio.create_task(puller.next())
    await asyncio.sleep(0)  # let it start waiting for the next item
    await puller.close()
    assert closed.is_set() and pending.cancelled()
