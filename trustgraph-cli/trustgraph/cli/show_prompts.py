"""tg-show-prompts: list the prompt templates in config, for people to read."""
import argparse
import json
import sys
from typing import Any

from pydantic import ValidationError

from trustgraph.schema import PROMPT_CONFIG_TYPE, PromptTemplate

from .common import parser, run
from .config_items import block, invalid, show_items

PROG = "tg-show-prompts"


def parse(argv: list[str] | None) -> argparse.Namespace:
    return parser(PROG, "List every prompt template: id, response type, system prompt, "
                        "template text and schema.", flow=False).parse_args(argv)


def describe(id: str, value: Any) -> str:
    """One template as an indented block headed by its id."""
    try:
        template = PromptTemplate.model_validate(value)
    except ValidationError as error:
        return invalid(id, value, error)
    lines = [id, f"  response type: {template.response_type}"]
    if template.system:
        lines.append(block("system", template.system))
    lines.append(block("prompt", template.prompt))
    if template.json_schema is not None:
        lines.append(block("schema", json.dumps(template.json_schema, indent=2,
                                                 ensure_ascii=False)))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    return run(PROG, show_items(args, PROMPT_CONFIG_TYPE, describe,
                                "no prompt templates in config"))


if __name__ == "__main__":
    sys.exit(main())
