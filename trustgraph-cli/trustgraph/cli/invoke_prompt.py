"""tg-invoke-prompt: answer a prompt template from config (the prompt service of a flow)."""
import argparse
import json
import sys
from typing import Any

from .common import connect, parser, print_json, print_stream, run, show_usage

PROG = "tg-invoke-prompt"


def variable(argument: str) -> tuple[str, Any]:
    """``name=text`` gives a string; ``name:=json`` gives any JSON value."""
    name, equals, value = argument.partition("=")
    if not equals:
        raise argparse.ArgumentTypeError(f"{argument!r}: expected name=value or name:=JSON")
    if name.endswith(":"):
        name = name[:-1]
        try:
            return _named(name, json.loads(value), argument)
        except json.JSONDecodeError as error:
            raise argparse.ArgumentTypeError(f"{argument!r}: not JSON ({error})") from None
    return _named(name, value, argument)


def _named(name: str, value: Any, argument: str) -> tuple[str, Any]:
    if not name:
        raise argparse.ArgumentTypeError(f"{argument!r}: the variable needs a name")
    return name, value


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = parser(PROG, "Render a prompt template with variables, send it to the LLM "
                             "and print the answer as it streams (a JSON template's "
                             "answer is printed as indented JSON).")
    arguments.usage = f"{PROG} [options] template-id [name=value | name:=JSON ...]"
    arguments.add_argument("id", metavar="template-id", help="the template, e.g. kg-prompt")
    arguments.add_argument("variables", nargs="*", type=variable, metavar="name=value",
                           help="a template variable: name=text (a string) or "
                                "name:=JSON (any JSON value, e.g. documents:='[\"a\", \"b\"]')")
    arguments.add_argument("--no-streaming", dest="streaming", action="store_false",
                           help="wait for the whole answer instead of streaming it")
    arguments.add_argument("--show-usage", action="store_true",
                           help="print tokens in/out and the model to stderr afterwards")
    return arguments.parse_args(argv)


async def invoke(args: argparse.Namespace) -> None:
    async with connect(args, traced=True) as client:
        stream = client.prompt_stream(args.id, dict(args.variables), args.streaming,
                                      flow=args.flow_id)
        await print_stream(stream)
        if stream.is_object:
            print_json(stream.object)
    if args.show_usage:
        show_usage(stream.usage)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    return run(PROG, invoke(args))


if __name__ == "__main__":
    sys.exit(main())
