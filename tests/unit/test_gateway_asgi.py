"""The aiohttp → ASGI bridge (gateway/apis/asgi.py) with a tiny ASGI application
inline, behind a real aiohttp server, driven by a real HTTP client."""
import asyncio

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from trustgraph.gateway.apis.asgi import served


async def echo(scope, receive, send):
    """Answers with what it was given: the scope's parts and the body, in two writes."""
    message = await receive()
    await send({"type": "http.response.start", "status": 201, "headers": [
        (b"content-type", b"text/plain"), (b"x-seen", scope["extra"].encode())]})
    await send({"type": "http.response.body", "more_body": True,
                "body": f"{scope['method']} {scope['path']}?{scope['query_string'].decode()} "
                        .encode()})
    await send({"type": "http.response.body", "body": message["body"]})


class Streaming:
    """Streams until told the client has gone (``http.disconnect``), then records it."""

    def __init__(self) -> None:
        self.disconnected = asyncio.Event()

    async def __call__(self, scope, receive, send):
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        listening = asyncio.create_task(receive())
        while not listening.done():
            await send({"type": "http.response.body", "body": b"tick\n", "more_body": True})
            await asyncio.sleep(0.01)
        assert listening.result() == {"type": "http.disconnect"}
        self.disconnected.set()


@pytest.fixture
async def server():
    streaming = Streaming()

    async def handle(request: web.Request) -> web.StreamResponse:
        app = streaming if request.path == "/stream" else echo
        return await served(request, app, {"extra": "given"})

    application = web.Application()
    application.router.add_route("*", "/{tail:.*}", handle)
    test_server = TestServer(application, handler_cancellation=True)
    await test_server.start_server()
    yield test_server, streaming
    await test_server.close()


async def test_the_request_and_the_answer_cross_the_bridge(server):
    test_server, _ = server
    async with aiohttp.ClientSession() as http:
        async with http.post(test_server.make_url("/a/b?x=1"), data=b"body") as response:
            assert response.status == 201 and response.headers["x-seen"] == "given"
            assert await response.text() == "POST /a/b?x=1 body"


async def test_a_client_that_leaves_is_an_http_disconnect(server):
    test_server, streaming = server
    async with aiohttp.ClientSession() as http:
        async with http.get(test_server.make_url("/stream")) as response:
            assert await response.content.readline() == b"tick\n"
    async with asyncio.timeout(10):
        await streaming.disconnected.wait()
