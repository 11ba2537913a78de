"""The websocket's requests each in their own task (core/websocket.py), against the real
``SocketEndpoint`` in a tiny app built inline, its dispatcher scripted: one request
held in its setup does not hold up the next on the same socket, and a request the
dispatcher refuses gets its error frame with the socket carrying on."""
import asyncio
from collections.abc import AsyncGenerator

import aiohttp
import pytest
from aiohttp import web

from trustgraph.gateway.core.auth import Auth
from trustgraph.gateway.core.dispatch import Dispatcher, Frame
from trustgraph.gateway.core.errors import GatewayError
from trustgraph.gateway.core.services import SERVICES
from trustgraph.gateway.core.websocket import Limits, SocketEndpoint

DEADLINE = 5.0


class ScriptedDispatcher:
    """Routes and validates as the gateway does; answers ``"text-completion"``
    requests with one final record, once the prompt's event (if any) is set."""

    def __init__(self) -> None:
        self.held: dict[str, asyncio.Event] = {}
        self.entered: dict[str, asyncio.Event] = {}

    def hold(self, prompt: str) -> asyncio.Event:
        self.entered[prompt] = asyncio.Event()
        self.held[prompt] = asyncio.Event()
        return self.held[prompt]

    def resolve(self, service: object, flow: object):
        if service not in SERVICES:
            raise GatewayError("unknown-service", f"unknown service {service!r}", 404)
        return SERVICES[service]

    prepare = staticmethod(Dispatcher.prepare)

    async def frames(self, row, flow, record, request_id=None, *, caller
                     ) -> AsyncGenerator[list[Frame], None]:
        if record.prompt in self.held:  # a slow setup: a requester still starting, say
            self.entered[record.prompt].set()
            await self.held[record.prompt].wait()
        yield [(b'{"response":"%s","end_of_stream":true}' % record.prompt.encode(), True)]


@pytest.fixture
async def socket():
    dispatcher = ScriptedDispatcher()
    endpoint = SocketEndpoint(dispatcher, Auth(""), Limits(max_inflight=8, max_frame=1 << 16))
    app = web.Application()
    app.router.add_get("/api/v1/socket", endpoint.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    async with aiohttp.ClientSession() as session, \
            session.ws_connect(f"http://127.0.0.1:{port}/api/v1/socket") as ws:
        yield ws, dispatcher
    await endpoint.close_all()
    await runner.cleanup()


def asking(client_id: str, prompt: str, service: str = "text-completion") -> dict:
    return {"id": client_id, "service": service, "flow": "default",
            "request": {"prompt": prompt, "streaming": True}}


async def test_a_request_held_in_its_setup_does_not_hold_up_the_next(socket):
    ws, dispatcher = socket
    release = dispatcher.hold("slow")
    async with asyncio.timeout(DEADLINE):
        await ws.send_json(asking("a", "slow"))
        await dispatcher.entered["slow"].wait()
        await ws.send_json(asking("b", "fast"))
        assert await ws.receive_json() == {
            "id": "b", "response": {"response": "fast", "end_of_stream": True},
            "complete": True}
        release.set()
        assert (await ws.receive_json())["id"] == "a"


async def test_a_refused_request_gets_its_error_and_its_id_is_free_again(socket):
    ws, _ = socket
    async with asyncio.timeout(DEADLINE):
        await ws.send_json(asking("a", "x", service="no-such-service"))
        await ws.send_json(asking("b", "after"))
        refused, answered = await ws.receive_json(), await ws.receive_json()
        assert refused["id"] == "a" and refused["error"]["type"] == "unknown-service"
        assert refused["complete"] is True
        assert answered["id"] == "b" and answered["complete"] is True
        await ws.send_json(asking("a", "again"))
        assert (await ws.receive_json())["response"]["response"] == "again"
