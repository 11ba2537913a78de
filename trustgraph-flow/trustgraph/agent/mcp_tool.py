"""Calling a tool of a Model Context Protocol server over streamable HTTP, with the
official ``mcp`` SDK.

One connection per call: a tool call is rare next to the LLM calls around it, and a
connection held open would outlive a server restart or a changed ``url``. The call
runs in the request's task, so a cancelled dialog closes the connection with it.

The SDK is imported on a thread, in the background as soon as config offers an MCP
tool (``warm_sdk``), else on the first call: it takes a second or more to import, and
a process whose tools use no MCP server should not pay that at all.
"""
import asyncio
import importlib
import json
import logging
import sys
from types import ModuleType
from typing import Any

# httpx logs every request at INFO: one line per MCP message is noise, not news.
logging.getLogger("httpx").setLevel(logging.WARNING)
logging.getLogger("httpx2").setLevel(logging.WARNING)


class McpToolError(Exception):
    """The server ran the tool and reported an error (``is_error``)."""


async def call_mcp_tool(url: str, name: str, arguments: dict[str, Any],
                        timeout: float) -> str:
    """The tool's result as text: its text content joined, else its structured
    content as JSON."""
    mcp = await _imported()
    async with mcp.Client(url, read_timeout_seconds=timeout) as client:
        result = await client.call_tool(name, arguments)
    texts = [block.text for block in result.content if getattr(block, "text", None)]
    text = "\n".join(texts) if texts else json.dumps(result.structured_content,
                                                     ensure_ascii=False)
    if result.is_error:
        raise McpToolError(text)
    return text


_warming: set[asyncio.Task] = set()  # held here, or the loop could drop the task


def warm_sdk() -> None:
    """Import the SDK in the background now (config offers an MCP tool), so the first
    call does not wait for it."""
    if "mcp" not in sys.modules and not _warming:
        task = asyncio.ensure_future(_imported())
        _warming.add(task)
        task.add_done_callback(_warming.discard)


async def _imported() -> ModuleType:
    """The SDK, imported on first use and on a thread: importing it takes a second or
    more (a web framework comes with it), which only a process that calls an MCP tool
    should pay, and without holding up the streams its event loop is serving. (Once
    imported this is a dictionary look-up; on the thread, a call that comes while the
    first import runs waits for it to finish rather than see half a module.)"""
    return await asyncio.to_thread(importlib.import_module, "mcp")
