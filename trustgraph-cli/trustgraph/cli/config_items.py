"""The three commands that edit one type of config item, written once: ``tg-show-<items>``
lists every item for people to read, ``tg-set-<item>`` creates or replaces one (checked
before it is stored), ``tg-delete-<item>`` removes one. ``prompts.py`` (prompt
templates) and ``tools.py`` (agent tools) each describe their type as one
``ConfigItems``; its ``show``, ``set`` and ``delete`` are the console scripts."""
import argparse
import json
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from trustgraph.api import TrustGraphError

from .common import connect, parser, run

INDENT = "    "


M = TypeVar("M", bound=BaseModel)  # an item as validated (its config_value() is stored)


@dataclass(frozen=True)
class ConfigItems(Generic[M]):
    config_type: str  # e.g. "prompt"
    item: str    # one item in command names: tg-set-<item>, tg-delete-<item>
    items: str   # all of them: tg-show-<items>
    noun: str    # in messages, e.g. "prompt template"
    model: type[M]  # what an item must validate as
    shown: str   # what tg-show lists of each, e.g. "id, name, kind"
    effect: str  # what tg-set says happens next, e.g. "the agent offers it ..."
    describe: Callable[[M], list[str]]  # a valid item's lines after its id
    options: Callable[[argparse.ArgumentParser], None]  # tg-set's, beyond --id
    # The item tg-set's options describe, to validate; ValueError says what is wrong.
    value: Callable[[argparse.Namespace], dict[str, Any]]
    # The config keys an item may be kept at, the one written (and winning) first.
    keys_of: Callable[[str], tuple[str, ...]] = lambda id: (id,)
    # The type's config values as items by id, and lines shown before them.
    by_id: Callable[[dict[str, Any]], tuple[dict[str, Any], list[str]]] = \
        lambda values: (values, [])

    def show(self, argv: list[str] | None = None) -> int:
        prog = f"tg-show-{self.items}"
        args = parser(prog, f"List every {self.noun}: {self.shown}.", flow=False
                      ).parse_args(argv)
        return run(prog, self._show(args))

    def set(self, argv: list[str] | None = None) -> int:
        args = self.parse_set(argv)
        return run(f"tg-set-{self.item}", self._store(args))

    def delete(self, argv: list[str] | None = None) -> int:
        prog = f"tg-delete-{self.item}"
        arguments = parser(prog, f"Delete a {self.noun} from config.", flow=False)
        arguments.add_argument("--id", required=True, help=f"{self.item} id")
        args = arguments.parse_args(argv)
        return run(prog, self._delete(args))

    def parse_set(self, argv: list[str] | None) -> argparse.Namespace:
        """tg-set's arguments, ``args.item`` the validated item (a bad one exits 2,
        saying what is wrong)."""
        arguments = parser(f"tg-set-{self.item}", f"Create or replace a {self.noun} "
                           f"(checked before it is stored); {self.effect}.", flow=False)
        arguments.add_argument("--id", required=True, help=f"{self.item} id (the config key)")
        self.options(arguments)
        args = arguments.parse_args(argv)
        try:
            args.item = self._valid(self.value(args))
        except ValueError as error:
            arguments.error(str(error))
        return args

    def _valid(self, value: dict[str, Any]) -> M:
        try:
            return self.model.model_validate(value)
        except ValidationError as error:
            raise ValueError(f"invalid {self.item}: {problem(error)}") from None

    async def _show(self, args: argparse.Namespace) -> None:
        async with connect(args) as client:
            items, heading = self.by_id(await client.config_values(self.config_type))
        if not items:
            print(f"no {self.noun}s in config", flush=True)
            return
        print("\n\n".join([*heading, *(self._described(key, items[key])
                                        for key in sorted(items))]), flush=True)

    def _described(self, key: str, value: Any) -> str:
        """One item as an indented block headed by its key; a stored item that does
        not validate, as it is, with the first problem."""
        try:
            item = self.model.model_validate(value)
        except ValidationError as error:
            return "\n".join([key, f"  invalid: {problem(error)}",
                              block("stored value", json.dumps(value, indent=2))])
        return "\n".join([key, *self.describe(item)])

    async def _store(self, args: argparse.Namespace) -> None:
        async with connect(args) as client:
            await client.put_config({self.config_type: {
                self.keys_of(args.id)[0]: args.item.config_value()}})

    async def _delete(self, args: argparse.Namespace) -> None:
        """Every key the item is kept at; none is ``not-found``, naming the items
        there are."""
        async with connect(args) as client:
            values = await client.config_values(self.config_type)
            keys = [key for key in self.keys_of(args.id) if key in values]
            if not keys:
                known = sorted(self.by_id(values)[0])
                raise TrustGraphError("not-found", f"no {self.noun} {args.id!r} (known: "
                                                   f"{', '.join(known) or 'none'})")
            await client.delete_config([(self.config_type, key) for key in keys])


def problem(error: ValidationError) -> str:
    """The first problem a validation found: ``where: what``."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]


def block(label: str, text: str) -> str:
    """``label:`` then ``text`` indented under it (blank lines too)."""
    return f"  {label}:\n" + textwrap.indent(text.rstrip("\n"), INDENT, lambda line: True)
