"""tg-show-config: print the whole configuration, with its version, as JSON."""
import argparse
import sys

from .common import connect, parser, print_json, run

PROG = "tg-show-config"


def parse(argv: list[str] | None) -> argparse.Namespace:
    return parser(PROG, "Print everything the config service holds (prompts, flows, "
                        "tools, ...) as JSON: {\"version\": N, \"config\": {type: "
                        "{key: value}}}.", flow=False).parse_args(argv)


async def show(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        config, version = await client.get_config()
    print_json({"version": version, "config": config})


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    return run(PROG, show(args))


if __name__ == "__main__":
    sys.exit(main())
