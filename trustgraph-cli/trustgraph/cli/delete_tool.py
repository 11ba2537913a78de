"""tg-delete-tool: remove an agent tool from config."""
import argparse
import sys

from trustgraph.schema.tool import TOOL_CONFIG_TYPE

from .common import parser, run
from .config_items import delete_item

PROG = "tg-delete-tool"


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = parser(PROG, "Delete an agent tool from config.", flow=False)
    arguments.add_argument("--id", required=True, help="tool id")
    return arguments.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    return run(PROG, delete_item(args, TOOL_CONFIG_TYPE, args.id, "agent tool"))


if __name__ == "__main__":
    sys.exit(main())
