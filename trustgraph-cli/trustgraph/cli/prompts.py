"""The prompt templates in config: tg-show-prompts, tg-set-prompt, tg-delete-prompt. The
prompt service uses an edited template from its next request on, without a restart."""
import argparse
import json
from pathlib import Path
from typing import Any

from trustgraph.schema import PROMPT_CONFIG_TYPE, PromptTemplate, prompt_config
from trustgraph.schema.prompt import template_keys

from .config_items import ConfigItems, block


def describe(template: PromptTemplate) -> list[str]:
    lines = [f"  response type: {template.response_type}"]
    if template.system:
        lines.append(block("system", template.system))
    lines.append(block("prompt", template.prompt))
    if template.json_schema is not None:
        lines.append(block("schema", json.dumps(template.json_schema, indent=2,
                                                 ensure_ascii=False)))
    return lines


def options(arguments: argparse.ArgumentParser) -> None:
    arguments.add_argument("--prompt", required=True,
                           help="the template text (Jinja2, e.g. 'Answer: {{ query }}')")
    arguments.add_argument("--system", default="", help="the system prompt (Jinja2 too)")
    arguments.add_argument("--response-type", choices=["text", "json", "jsonl"],
                           default="text", help="how the answer is read (default %(default)s)")
    arguments.add_argument("--schema", help="a JSON Schema the answer of a json/jsonl "
                                            "template must match: JSON, or @FILE to read it")


def value(args: argparse.Namespace) -> dict[str, Any]:
    schema = None
    if args.schema is not None:
        if args.response_type == "text":
            raise ValueError("--schema needs --response-type json or jsonl")
        schema = _schema(args.schema)
    return {"system": args.system, "prompt": args.prompt,
            "response-type": args.response_type, "schema": schema}


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


def by_id(values: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The templates by id, and the shared system prompt (when set) to show first."""
    templates, system = prompt_config(values)
    return templates, [block("shared system prompt (templates without one of their "
                             "own)", system)] if system else []


PROMPTS = ConfigItems(
    PROMPT_CONFIG_TYPE, "prompt", "prompts", "prompt template", PromptTemplate,
    shown="id, response type, system prompt, template text and schema",
    effect="the prompt service uses it from its next request on",
    describe=describe, options=options, value=value, keys_of=template_keys, by_id=by_id)
