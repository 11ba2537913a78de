"""tg-set-tool: create or replace an agent tool in config. The agent offers it from
its next request on, without a restart."""
import argparse
import sys

from pydantic import ValidationError

from trustgraph.schema.tool import TOOL_CONFIG_TYPE, TOOL_KINDS, ToolDefinition

from .common import connect, parser, run
from .config_items import problem

PROG = "tg-set-tool"


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = parser(PROG, "Create or replace an agent tool (checked before it is "
                             "stored).", flow=False)
    arguments.add_argument("--id", required=True, help="tool id (the config key)")
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
    args = arguments.parse_args(argv)
    try:
        args.tool = tool(args)
    except ValueError as error:
        arguments.error(str(error))
    return args


def tool(args: argparse.Namespace) -> ToolDefinition:
    """The tool the options describe; ``ValueError`` says what is wrong."""
    try:
        return ToolDefinition.model_validate({
            "name": args.name or args.id, "description": args.description,
            "kind": args.kind, "group": args.group,
            "arguments": [argument(text) for text in args.argument],
            "template": args.template, "url": args.mcp_url, "mcp_tool": args.mcp_tool})
    except ValidationError as error:
        raise ValueError(f"invalid tool: {problem(error)}") from None


def argument(text: str) -> dict[str, str]:
    """``NAME:TYPE:DESCRIPTION`` (the description may hold colons; TYPE and
    DESCRIPTION may be left out: a string, undescribed)."""
    name, _, rest = text.partition(":")
    type, _, description = rest.partition(":")
    if not name.strip():
        raise ValueError(f"--argument {text!r}: give NAME:TYPE:DESCRIPTION")
    return {"name": name.strip(), "type": type.strip() or "string",
            "description": description.strip()}


async def store(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        await client.put_config({TOOL_CONFIG_TYPE: {args.id: args.tool.config_value()}})


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    return run(PROG, store(args))


if __name__ == "__main__":
    sys.exit(main())
