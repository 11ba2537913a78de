"""Running one tool: what each ``kind`` calls, and its result as the observation.

Each call is awaited in the dialog's own task: when the dialog is cancelled the call
is cancelled with it, and the requester sends the cancel on to the service (and so
to a GraphRAG answer's LLM stream). Tokens the tool's LLM calls report are added to
the dialog's ``Usage``.
"""
import json
from contextlib import aclosing
from typing import Any

from trustgraph.base import Clients, Delta, PromptClient, RequestTimeout, ServiceError, relay
from trustgraph.schema import (
    AgentRequest,
    DocumentRagRequest,
    GraphRagRequest,
    RagResponse,
    TextCompletionRequest,
    TextCompletionResponse,
    Usage,
)
from trustgraph.schema.tool import ToolDefinition

from .mcp_tool import McpToolError, call_mcp_tool


class ToolFailed(Exception):
    """The tool ran and failed: the model is told, and may try something else."""


class BadArguments(ValueError):
    """The arguments are not what the tool needs: the model is told."""


async def run_tool(tool: ToolDefinition, arguments: dict[str, Any], request: AgentRequest,
                   clients: Clients, usage: Usage, timeout: float) -> str:
    try:
        return await _KINDS[tool.kind](tool, arguments, request, clients, usage, timeout)
    except ServiceError as failure:
        raise ToolFailed(f"{failure.error.type}: {failure.error.message}") from None
    except RequestTimeout as failure:
        raise ToolFailed(str(failure)) from None


def question_of(arguments: dict[str, Any]) -> str:
    """The question a question-answering tool was given: ``question`` (or ``query``),
    else the one string argument there is."""
    for name in ("question", "query"):
        if isinstance(arguments.get(name), str) and arguments[name].strip():
            return arguments[name]
    strings = [v for v in arguments.values() if isinstance(v, str) and v.strip()]
    if len(strings) != 1:
        raise BadArguments('the arguments need a "question" (a string)')
    return strings[0]


async def _graph_rag(tool, arguments, request, clients, usage, timeout) -> str:
    return await _rag(clients, "graph-rag", usage, GraphRagRequest(
        query=question_of(arguments), user=request.user, collection=request.collection))


async def _document_rag(tool, arguments, request, clients, usage, timeout) -> str:
    return await _rag(clients, "document-rag", usage, DocumentRagRequest(
        query=question_of(arguments), user=request.user, collection=request.collection))


async def _rag(clients: Clients, service: str, usage: Usage,
               rag_request: GraphRagRequest | DocumentRagRequest) -> str:
    """The answer, streamed and collected: the same path as every other answer, and a
    cancel finds the RAG service mid-stream, which stops its LLM at once."""
    rag_request.streaming = True
    parts: list[str] = []
    requester = await clients.get(service)
    async with aclosing(relay(requester.frames(rag_request), RagResponse,
                              lambda final: usage.add(Usage.of(final)))) as pieces:
        async for piece in pieces:
            if isinstance(piece, Delta):
                parts.append(piece.text)
    return "".join(parts)


async def _text_completion(tool, arguments, request, clients, usage, timeout) -> str:
    llm = await clients.get("text-completion")
    answer = await llm.call(TextCompletionRequest(prompt=question_of(arguments)),
                            TextCompletionResponse)
    usage.add(Usage.of(answer))
    return answer.response


async def _prompt(tool, arguments, request, clients, usage, timeout) -> str:
    result = await PromptClient(await clients.get("prompt")).invoke(tool.template, arguments)
    usage.add(result.usage)
    if result.text is not None:
        return result.text
    return json.dumps(result.object, ensure_ascii=False)


async def _mcp(tool, arguments, request, clients, usage, timeout) -> str:
    try:
        return await call_mcp_tool(tool.url, tool.remote_name, arguments, timeout)
    except McpToolError as failure:
        raise ToolFailed(str(failure)) from None
    except Exception as failure:  # a server outside the platform: any failure is its own
        raise ToolFailed(f"MCP server {tool.url}: {type(failure).__name__}: "
                         f"{failure}") from None


_KINDS = {
    "knowledge-query": _graph_rag,
    "document-query": _document_rag,
    "text-completion": _text_completion,
    "prompt": _prompt,
    "mcp-tool": _mcp,
}
