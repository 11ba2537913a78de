"""tg-delete-prompt: remove a prompt template from config."""
import argparse
import sys

from trustgraph.schema import PROMPT_CONFIG_TYPE

from .common import parser, run
from .config_items import delete_item

PROG = "tg-delete-prompt"


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = parser(PROG, "Delete a prompt template from config.", flow=False)
    arguments.add_argument("--id", required=True, help="template id")
    return arguments.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    return run(PROG, delete_item(args, PROMPT_CONFIG_TYPE, args.id, "prompt template"))


if __name__ == "__main__":
    sys.exit(main())
