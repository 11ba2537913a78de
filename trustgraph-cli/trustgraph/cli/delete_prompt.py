"""tg-delete-prompt: remove a prompt template from config."""
import argparse
import sys

from trustgraph.api import TrustGraphError
from trustgraph.schema import PROMPT_CONFIG_TYPE

from .common import connect, parser, run

PROG = "tg-delete-prompt"


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = parser(PROG, "Delete a prompt template from config.", flow=False)
    arguments.add_argument("--id", required=True, help="template id")
    return arguments.parse_args(argv)


async def delete(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        try:
            await client.delete_config([(PROMPT_CONFIG_TYPE, args.id)])
        except TrustGraphError as error:
            if error.type != "not-found":
                raise
            known = sorted(await client.config_values(PROMPT_CONFIG_TYPE))
            raise TrustGraphError("not-found", f"no prompt template {args.id!r} (known: "
                                               f"{', '.join(known) or 'none'})") from None


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    return run(PROG, delete(args))


if __name__ == "__main__":
    sys.exit(main())
