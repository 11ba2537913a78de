"""tg-set-prompt: create or replace a prompt template in config. The prompt service
uses it from the next request on, without a restart."""
import argparse
import json
import sys
from pathlib import Path

from pydantic import ValidationError

from trustgraph.schema import PROMPT_CONFIG_TYPE, PromptTemplate

from .common import connect, parser, run
from .config_items import problem

PROG = "tg-set-prompt"


def parse(argv: list[str] | None) -> argparse.Namespace:
    arguments = parser(PROG, "Create or replace a prompt template (checked before it is "
                             "stored).", flow=False)
    arguments.add_argument("--id", required=True, help="template id, e.g. kg-prompt")
    arguments.add_argument("--prompt", required=True,
                           help="the template text (Jinja2, e.g. 'Answer: {{ query }}')")
    arguments.add_argument("--system", default="", help="the system prompt (Jinja2 too)")
    arguments.add_argument("--response-type", choices=["text", "json", "jsonl"],
                           default="text", help="how the answer is read (default %(default)s)")
    arguments.add_argument("--schema", help="a JSON Schema the answer of a json/jsonl "
                                            "template must match: JSON, or @FILE to read it")
    args = arguments.parse_args(argv)
    try:
        args.template = template(args)
    except ValueError as error:
        arguments.error(str(error))
    return args


def template(args: argparse.Namespace) -> PromptTemplate:
    """The template the options describe; ``ValueError`` says what is wrong."""
    schema = None
    if args.schema is not None:
        if args.response_type == "text":
            raise ValueError("--schema needs --response-type json or jsonl")
        schema = _schema(args.schema)
    try:
        return PromptTemplate.model_validate({
            "system": args.system, "prompt": args.prompt,
            "response-type": args.response_type, "schema": schema})
    except ValidationError as error:
        raise ValueError(f"invalid template: {problem(error)}") from None


def _schema(text: str) -> object:
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text()
        except OSError as error:
            raise ValueError(f"--schema: cannot read {text[1:]}: {error.strerror}") from None
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"--schema is not JSON: {error}") from None
    if not isinstance(schema, dict):
        raise ValueError("--schema must be a JSON object (a JSON Schema)")
    return schema


async def store(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        await client.put_config({PROMPT_CONFIG_TYPE: {args.id: args.template.config_value()}})


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    return run(PROG, store(args))


if __name__ == "__main__":
    sys.exit(main())
