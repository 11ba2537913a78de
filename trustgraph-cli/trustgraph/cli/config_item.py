"""Any config item, by type and key, with TrustGraph's flags: tg-list-config-items,
tg-get-config-item, tg-put-config-item, tg-delete-config-item. (Prompts and tools have
commands of their own that check what they store: tg-set-prompt, tg-set-tool.)

A value is given as text, as TrustGraph's commands take it, and stored by the config
service's one rule (docs/config.md): text that is JSON is stored as that JSON value,
other text as a string. Read back, a string is printed as it is and anything else as
JSON (``--format json``: always JSON).
"""
import argparse
import json
import sys
from typing import Any

from .common import connect, parser, print_json, run

FORMATS = ("text", "json")


def _item_parser(prog: str, description: str, key: bool = True) -> argparse.ArgumentParser:
    arguments = parser(prog, description, flow=False)
    arguments.add_argument("--type", required=True, help="the item's type, e.g. prompt, tool")
    if key:
        arguments.add_argument("--key", required=True, help="the item's key within its type")
    return arguments


def _format(arguments: argparse.ArgumentParser) -> None:
    arguments.add_argument("--format", choices=FORMATS, default="text",
                           help="text: a string as it is, other values as JSON; json: "
                                "JSON always (default %(default)s)")


def shown(value: Any, format: str) -> str:
    if format == "text" and isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


async def _list(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        keys = await client.config_keys(args.type)
    if args.format == "json":
        print_json(keys)
    elif keys:
        print("\n".join(keys), flush=True)


async def _get(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        value = await client.config_item(args.type, args.key)
    print(shown(value, args.format), flush=True)


async def _put(args: argparse.Namespace) -> None:
    text = sys.stdin.read() if args.stdin else args.value
    async with connect(args) as client:
        version = await client.put_config({args.type: {args.key: text}}, value_format="text")
    print(f"config item {args.type}/{args.key} set (config version {version})", flush=True)


async def _delete(args: argparse.Namespace) -> None:
    async with connect(args) as client:
        version = await client.delete_config([(args.type, args.key)])
    print(f"config item {args.type}/{args.key} deleted (config version {version})",
          flush=True)


def list_main(argv: list[str] | None = None) -> int:
    prog = "tg-list-config-items"
    arguments = _item_parser(prog, "List the keys of one type of config item.", key=False)
    _format(arguments)
    return run(prog, _list(arguments.parse_args(argv)))


def get_main(argv: list[str] | None = None) -> int:
    prog = "tg-get-config-item"
    arguments = _item_parser(prog, "Print one config item's value.")
    _format(arguments)
    return run(prog, _get(arguments.parse_args(argv)))


def put_main(argv: list[str] | None = None) -> int:
    prog = "tg-put-config-item"
    arguments = _item_parser(prog, "Create or replace one config item: text that is JSON "
                                   "is stored as that JSON, other text as a string. Every "
                                   "processor that reads the type uses it from its next "
                                   "request on.")
    value = arguments.add_mutually_exclusive_group(required=True)
    value.add_argument("--value", help="the value, as text (JSON for a structured value)")
    value.add_argument("--stdin", action="store_true", help="read the value from stdin")
    return run(prog, _put(arguments.parse_args(argv)))


def delete_main(argv: list[str] | None = None) -> int:
    prog = "tg-delete-config-item"
    arguments = _item_parser(prog, "Delete one config item (not-found if it is not there).")
    return run(prog, _delete(arguments.parse_args(argv)))
