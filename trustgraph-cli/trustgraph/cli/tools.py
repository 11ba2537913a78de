"""The agent's tools in config: tg-show-tools, tg-set-tool, tg-delete-tool. The agent
offers an edited tool from its next request on, without a restart."""
import argparse
from typing import Any

from trustgraph.schema.tool import TOOL_CONFIG_TYPE, TOOL_KINDS, ToolDefinition

from .config_items import INDENT, ConfigItems, block


def describe(tool: ToolDefinition) -> list[str]:
    lines = [f"  name: {tool.name}", f"  kind: {tool.kind}"]
    lines += [f"  {label}: {text}" for label, text in (
        ("groups", ", ".join(tool.group)), ("template", tool.template), ("url", tool.url),
        ("mcp tool", tool.remote_name if tool.remote_name != tool.name else "")) if text]
    lines.append(block("description", tool.description))
    if tool.arguments:
        lines.append("  arguments:")
        lines += [f"{INDENT}{arg.name} ({arg.type})" + (f": {arg.description}"
                                                         if arg.description else "")
                  for arg in tool.arguments]
    return lines


def options(arguments: argparse.ArgumentParser) -> None:
    arguments.add_argument("--name", help="the name the LLM calls it by (default: the id)")
    arguments.add_argument("--description", required=True,
                           help="what the tool is for, as the LLM is told")
    arguments.add_argument("--kind", required=True, choices=TOOL_KINDS,
                           help="what calling it does")
    arguments.add_argument("--group", action="append", default=[],
                           help="a tool group it belongs to (repeat for several)")
    arguments.add_argument("--argument", action="append", default=[],
                           metavar="NAME:TYPE:DESCRIPTION",
                           help="an argument the LLM passes (repeat for several); TYPE "
                                "is a JSON type such as string or number")
    arguments.add_argument("--template", help="kind prompt: the prompt template id")
    arguments.add_argument("--mcp-url", dest="mcp_url",
                           help="kind mcp-tool: the MCP server's URL (streamable HTTP)")
    arguments.add_argument("--mcp-tool", help="kind mcp-tool: the server's name for the "
                                              "tool (default: --name)")


def value(args: argparse.Namespace) -> dict[str, Any]:
    return {"name": args.name or args.id, "description": args.description,
            "kind": args.kind, "group": args.group,
            "arguments": [argument(text) for text in args.argument],
            "template": args.template, "url": args.mcp_url, "mcp_tool": args.mcp_tool}


def argument(text: str) -> dict[str, str]:
    """``NAME:TYPE:DESCRIPTION`` (the description may hold colons; TYPE and
    DESCRIPTION may be left out: a string, undescribed)."""
    name, _, rest = text.partition(":")
    type, _, description = rest.partition(":")
    if not name.strip():
        raise ValueError(f"--argument {text!r}: give NAME:TYPE:DESCRIPTION")
    return {"name": name.strip(), "type": type.strip() or "string",
            "description": description.strip()}


TOOLS = ConfigItems(
    TOOL_CONFIG_TYPE, "tool", "tools", "agent tool", ToolDefinition,
    shown="id, name, kind, groups, description and arguments",
    effect="the agent offers it from its next request on",
    describe=describe, options=options, value=value)
