"""tg-show-prompts: list the prompt templates in config, for people to read."""
import argparse
import json
import sys
import textwrap
from typing import Any

from pydantic import ValidationError

from trustgraph.schema import PROMPT_CONFIG_TYPE, PromptTemplate

from .common import connect, parser, run

PROG = "tg-show-prompts"
INDENT = "    "


def parse(argv: list[str] | None) -> argparse.Namespace:
    return parser(PROG, "List every prompt template: id, response type, system prompt, "
                        "template text and schema.", flow=False).parse_args(argv)


def describe(id: str, value: Any) -> str:
    """One template as an indented block headed by its id."""
    try:
        template = PromptTemplate.model_validate(value)
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "template"
        return "\n".join([id, f"  invalid: {where}: {problem['msg']}",
                          _block("stored value", json.dumps(value, indent=2))])
    lines = [id, f"  response type: {template.response_type}"]
    if template.system:
        lines.append(_block("system", template.system))
    lines.append(_block("prompt", template.prompt))
    if template.json_schema is not None:
        lines.append(_block("schema", json.dumps(template.json_schema, indent=2,
                                                 ensure_ascii=False)))
    return "\n".join(lines)


def _block(label: str, text: str) -> str:
    return f"  {label}:\n" + textwrap.indent(text.rstrip("\n"), INDENT, lambda line: True)


async def show(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        templates = await client.config_values(PROMPT_CONFIG_TYPE)
    if not templates:
        print("no prompt templates in config", flush=True)
        return
    print("\n\n".join(describe(id, templates[id]) for id in sorted(templates)), flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    return run(PROG, show(args))


if __name__ == "__main__":
    sys.exit(main())
