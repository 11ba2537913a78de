"""tg-mcp-stdio: the gateway's MCP server for hosts that only launch local commands
(Claude Desktop, IDEs): MCP over this process's stdin and stdout, each request passed
on to the gateway's ``/mcp`` (``TRUSTGRAPH_URL``, with ``TRUSTGRAPH_TOKEN`` as the
key, which decides the tenant and the tools offered; ``-f`` the flow they ask).

Both sides are the official ``mcp`` SDK: a server on stdio whose handlers are a
client of the gateway. Each side negotiates the protocol version its peer speaks,
so a host and the gateway need not agree on one. Tools are listed and called on
the gateway; their progress notifications come back to the host as they arrive,
and a host that cancels a call cancels it on the gateway. Logs go to stderr:
stdout carries only the protocol.
"""
import logging
import sys
from typing import Any
from urllib.parse import urlencode

import httpx2
import mcp_types as types
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

from .common import parser, run

PROG = "tg-mcp-stdio"
# As the SDK's own HTTP client: a tool's answer may take minutes to come (the agent),
# its progress events keep the stream alive meanwhile.
TIMEOUT = httpx2.Timeout(30.0, read=300.0)


def mcp_url(url: str, flow: str = "default") -> str:
    """The gateway's MCP endpoint for its base URL (an ``…/mcp`` URL is kept), asking
    ``flow``."""
    url = url.rstrip("/")
    if url.startswith("ws"):
        url = "http" + url[2:]
    url = url if url.endswith("/mcp") else f"{url}/mcp"
    return url if flow == "default" else f"{url}?{urlencode({'flow': flow})}"


async def bridge(url: str, token: str | None, flow: str = "default") -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with httpx2.AsyncClient(headers=headers, timeout=TIMEOUT) as http, \
            Client(streamable_http_client(mcp_url(url, flow), http_client=http),
                   client_info=types.Implementation(name=PROG, version="1")) as gateway:

        async def list_tools(ctx: ServerRequestContext[Any],
                             params: types.PaginatedRequestParams | None
                             ) -> types.ListToolsResult:
            listed = await gateway.list_tools(cursor=params.cursor if params else None,
                                              cache_mode="refresh")
            return types.ListToolsResult(tools=listed.tools, next_cursor=listed.next_cursor)

        async def call_tool(ctx: ServerRequestContext[Any],
                            params: types.CallToolRequestParams) -> types.CallToolResult:
            async def progress(progress: float, total: float | None, message: str | None
                               ) -> None:
                await ctx.session.report_progress(progress, total, message)

            result = await gateway.call_tool(params.name, params.arguments,
                                             progress_callback=progress)
            return types.CallToolResult(content=result.content, is_error=result.is_error,
                                        structured_content=result.structured_content)

        info = gateway.server_info
        server: Server[Any] = Server(
            info.name if info else "trustgraph", version=info.version if info else "",
            instructions=gateway.instructions,
            on_list_tools=list_tools, on_call_tool=call_tool)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())


def main(argv: list[str] | None = None) -> int:
    arguments = parser(PROG, "The gateway's MCP server over stdio, for MCP hosts that "
                             "launch a local command.").parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    return run(PROG, bridge(arguments.url, arguments.token, arguments.flow_id))


if __name__ == "__main__":
    sys.exit(main())
