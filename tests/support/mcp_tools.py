"""A tiny Model Context Protocol server for tests, built with the official ``mcp``
SDK and served over streamable HTTP on a free local port.

Tools: ``add(a, b)`` (the sum, as text), ``shout(text)`` (upper case), ``fail()``
(always an error result), and ``wait(seconds)`` (sleeps; records a call cut short in
``cancelled``, so a test can see a dialog's cancel reach the tool call).

    async with mcp_server() as server:
        server.url  # http://127.0.0.1:PORT/mcp
"""
import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from trustgraph.pubsub.embedded import free_port


@dataclass
class McpTestServer:
    url: str
    calls: list[tuple[str, dict]] = field(default_factory=list)
    waiting: asyncio.Event = field(default_factory=asyncio.Event)  # wait() has begun
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)


def build(record: McpTestServer) -> MCPServer:
    server = MCPServer("trustgraph-tests")

    @server.tool()
    def add(a: int, b: int) -> str:
        """Add two integers."""
        record.calls.append(("add", {"a": a, "b": b}))
        return str(a + b)

    @server.tool()
    def shout(text: str) -> str:
        """The text in upper case."""
        record.calls.append(("shout", {"text": text}))
        return text.upper()

    @server.tool()
    def fail() -> str:
        """Always fails."""
        raise ToolError("the fail tool failed, as it always does")

    @server.tool()
    async def wait(seconds: float) -> str:
        """Sleeps for a while."""
        record.calls.append(("wait", {"seconds": seconds}))
        record.waiting.set()
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            record.cancelled.set()
            raise
        return "waited"

    return server


@asynccontextmanager
async def mcp_server() -> AsyncIterator[McpTestServer]:
    port = free_port()
    record = McpTestServer(f"http://127.0.0.1:{port}/mcp")
    app = build(record).streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(10):
            while not server.started:
                if task.done():
                    task.result()  # raises what stopped it
                await asyncio.sleep(0.01)
        yield record
    finally:
        server.should_exit = True
        await task
