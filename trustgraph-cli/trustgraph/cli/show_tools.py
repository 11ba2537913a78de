"""tg-show-tools: list the agent's tools in config, for people to read."""
import argparse
import sys
from typing import Any

from pydantic import ValidationError

from trustgraph.schema.tool import TOOL_CONFIG_TYPE, ToolDefinition

from .common import parser, run
from .config_items import INDENT, block, invalid, show_items

PROG = "tg-show-tools"


def parse(argv: list[str] | None) -> argparse.Namespace:
    return parser(PROG, "List every agent tool: id, name, kind, groups, description and "
                        "arguments.", flow=False).parse_args(argv)


def describe(id: str, value: Any) -> str:
    """One tool as an indented block headed by its id."""
    try:
        tool = ToolDefinition.model_validate(value)
    except ValidationError as error:
        return invalid(id, value, error)
    lines = [id, f"  name: {tool.name}", f"  kind: {tool.kind}"]
    lines += [f"  {label}: {text}" for label, text in (
        ("groups", ", ".join(tool.group)), ("template", tool.template), ("url", tool.url),
        ("mcp tool", tool.mcp_tool)) if text]
    lines.append(block("description", tool.description))
    if tool.arguments:
        lines.append("  arguments:")
        lines += [f"{INDENT}{arg.name} ({arg.type})" + (f": {arg.description}"
                                                         if arg.description else "")
                  for arg in tool.arguments]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    return run(PROG, show_items(args, TOOL_CONFIG_TYPE, describe, "no agent tools in config"))


if __name__ == "__main__":
    sys.exit(main())
