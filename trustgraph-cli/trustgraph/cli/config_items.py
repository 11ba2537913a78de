"""What the commands that edit one type of config item share (prompt templates with
tg-set-prompt, tg-show-prompts, tg-delete-prompt; agent tools with tg-set-tool,
tg-show-tools, tg-delete-tool): a validation problem in one line, an indented block
of text, listing every item of the type, and deleting one by key."""
import argparse
import json
import textwrap
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from trustgraph.api import TrustGraphError

from .common import connect

INDENT = "    "


def problem(error: ValidationError) -> str:
    """The first problem a validation found: ``where: what``."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]


def block(label: str, text: str) -> str:
    """``label:`` then ``text`` indented under it (blank lines too)."""
    return f"  {label}:\n" + textwrap.indent(text.rstrip("\n"), INDENT, lambda line: True)


def invalid(id: str, value: Any, error: ValidationError) -> str:
    """A stored item that does not validate, shown as it is with the first problem."""
    return "\n".join([id, f"  invalid: {problem(error)}",
                      block("stored value", json.dumps(value, indent=2))])


async def show_items(args: argparse.Namespace, type: str, describe: Callable[[str, Any], str],
                     none: str) -> None:
    """Print every item of ``type``, by key, as ``describe(key, value)`` blocks
    separated by blank lines; ``none`` when there are none."""
    async with connect(args) as client:
        items = await client.config_values(type)
    if not items:
        print(none, flush=True)
        return
    print("\n\n".join(describe(key, items[key]) for key in sorted(items)), flush=True)


async def delete_item(args: argparse.Namespace, type: str, key: str, noun: str) -> None:
    """Delete item ``key`` of ``type``; a missing one is ``not-found``, naming the
    keys that do exist (``noun`` says what an item is, e.g. "prompt template")."""
    async with connect(args) as client:
        try:
            await client.delete_config([(type, key)])
        except TrustGraphError as error:
            if error.type != "not-found":
                raise
            known = sorted(await client.config_values(type))
            raise TrustGraphError("not-found", f"no {noun} {key!r} (known: "
                                               f"{', '.join(known) or 'none'})") from None
