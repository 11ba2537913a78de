"""The MCP server at ``/mcp`` (PROTOCOL §3b, docs/mcp.md): the knowledge base's
tools (``mcp_tools.py``) over the Model Context Protocol's streamable HTTP
transport, with the official ``mcp`` SDK.

The SDK's server side is ASGI (Starlette); the gateway is aiohttp. The SDK's own
entry point for the transport, ``StreamableHTTPSessionManager``, is kept whole
(it negotiates the protocol's versions, validates requests and streams answers as
SSE), and each ``/mcp`` request reaches it through a small ASGI bridge
(``asgi.py``): three callables, rather than re-implementing the transport from its
pieces, which are the SDK's internals and change between its versions.

The transport is stateless: every request stands alone (no session to pin a client
to one gateway replica), and a tool's progress notifications travel on the
response to its own call. Who is asking is decided by the gateway, as for every
route (``Core.served``: the key in ``Authorization: Bearer``), and handed to the
tools in the request's ASGI scope: the caller's key decides the tenant and the
tools offered (``mcp_tools.offered``). The tools ask on the flow the request names
(``X-TG-Flow``, or ``/mcp?flow=``), else the gateway's default. A client that goes
away cancels its tool call, and the service request behind it.
"""
from typing import Any, TypeVar

import mcp_types as types
from aiohttp import web
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from ..core import Caller, Core, Document, failed, named_flow, validation_message
from .asgi import served
from .mcp_tool import Call, Tool
from .mcp_tools import offered

MCP_PATH = "/mcp"
CALLER = "trustgraph.caller"  # the ASGI scope's key for who is asking
FLOW = "trustgraph.flow"  # and for the flow asked on (X-TG-Flow, or /mcp?flow=)
T = TypeVar("T")
INSTRUCTIONS = (
    "A knowledge base of documents and the knowledge graph extracted from them, in "
    "collections. Use ask for answers with their sources, search for passages to cite, "
    "graph_neighbourhood for what the graph says about one entity, lazy_summary for "
    "how well the graph covers a question, list_collections to see what there is.")
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def install(core: Core) -> None:
    server = McpServer(core)
    core.background(server.manager.run)
    for method in ("POST", "GET", "DELETE"):
        core.route(method, MCP_PATH, server.handle)
    core.document(Document((), lambda refs: {MCP_PATH: {method.lower(): {
        "summary": "the MCP server (streamable HTTP): tools ask, search, "
                   "graph_neighbourhood, lazy_summary, list_collections, load_text",
        "description": "JSON-RPC messages of the Model Context Protocol; docs/mcp.md.",
        "responses": {"200": {"description": "a JSON-RPC answer, or SSE events"}}}
        for method in ("POST", "GET", "DELETE")}}))


class McpServer:
    def __init__(self, core: Core) -> None:
        self.core = core
        self.server: Server[Any] = Server(
            "trustgraph", version="1", instructions=INSTRUCTIONS,
            on_list_tools=self.list_tools, on_call_tool=self.call_tool)
        self.manager = StreamableHTTPSessionManager(
            self.server, stateless=False, security_settings=_security(
                core.settings.tg_gateway_host),
            max_request_body_size=core.settings.tg_gateway_max_frame)

    async def handle(self, request: web.Request, caller: Caller) -> web.StreamResponse:
        flow = named_flow(request) or self.core.client.flows.default
        return await served(request, self.manager.handle_request,
                            {CALLER: caller, FLOW: flow})

    async def list_tools(self, ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_described(tool) for tool in offered(
            _caller(ctx))])

    async def call_tool(self, ctx: ServerRequestContext[Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        caller = _caller(ctx)
        tool = next((tool for tool in offered(caller) if tool.name == params.name), None)
        if tool is None:  # a tool this caller is not offered is one it does not know of
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool {params.name!r}")
        try:
            arguments = tool.arguments.model_validate(params.arguments or {})
        except ValidationError as error:
            return _failed(f"bad arguments: {validation_message(error, where='')}")
        told = 0

        async def progress(message: str) -> None:
            nonlocal told
            told += 1
            await ctx.session.report_progress(told, None, message)

        call = Call(self.core.client, caller, _scoped(ctx, FLOW, str), progress)
        try:
            text, result = await tool.run(call, arguments)
        except Exception as exception:
            refusal = failed(exception)
            return _failed(f"{refusal.type}: {refusal.message}")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=result.model_dump(mode="json", exclude_none=True))


def _caller(ctx: ServerRequestContext[Any]) -> Caller:
    return _scoped(ctx, CALLER, Caller)


def _scoped(ctx: ServerRequestContext[Any], key: str, kind: type[T]) -> T:
    """What the gateway's route put in the request's scope (who asks, on which flow)."""
    request = ctx.request
    value = request.scope.get(key) if request is not None else None
    if not isinstance(value, kind):  # only the gateway's route serves this server
        raise MCPError(code=types.INTERNAL_ERROR, message=f"no {key} for this request")
    return value


def _described(tool: Tool) -> types.Tool:
    return types.Tool(
        name=tool.name, description=tool.description,
        input_schema=tool.arguments.model_json_schema(),
        output_schema=tool.result.model_json_schema(mode="serialization"),
        annotations=types.ToolAnnotations(read_only_hint=tool.read_only,
                                          destructive_hint=False, open_world_hint=False))


def _failed(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)],
                                is_error=True)


def _security(host: str) -> TransportSecuritySettings | None:
    """On loopback, only requests naming a loopback host and origin: a web page the
    user opens cannot reach the tools through DNS rebinding (MCP's transport rules);
    listening elsewhere, the key is the guard."""
    if host not in LOOPBACK:
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"])

