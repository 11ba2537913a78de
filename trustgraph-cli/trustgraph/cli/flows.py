"""Starting and stopping flows, and editing the blueprints they are started from
(docs/flows.md), with TrustGraph's flags:

* ``tg-start-flow -n BLUEPRINT -i FLOW -d DESCRIPTION [-p JSON | --parameters-file F |
  --param NAME=VALUE ...]``
* ``tg-stop-flow -i FLOW``
* ``tg-get-flow-blueprint -n NAME`` (its JSON), ``tg-put-flow-blueprint -n NAME -c JSON``,
  ``tg-delete-flow-blueprint -n NAME``

Starting, stopping, putting and deleting need an admin's key (or an open gateway).
"""
import argparse
import json
from pathlib import Path
from typing import Any

from .common import connect, parser, print_json, run


def _blueprint_parser(prog: str, description: str) -> argparse.ArgumentParser:
    arguments = parser(prog, description, flow=False)
    arguments.add_argument("-n", "--blueprint-name", required=True, help="blueprint name")
    return arguments


def start_flow_main(argv: list[str] | None = None) -> int:
    prog = "tg-start-flow"
    arguments = _blueprint_parser(prog, "Start a flow from a blueprint, with parameter "
                                        "values: each is checked against the type the "
                                        "blueprint declares before anything starts "
                                        "(tg-show-flow-blueprints lists them).")
    arguments.add_argument("-i", "--flow-id", required=True, help="the new flow's id")
    arguments.add_argument("-d", "--description", required=True, help="what it is for")
    given = arguments.add_mutually_exclusive_group()
    given.add_argument("-p", "--parameters", help='parameters as a JSON object, e.g. '
                                                  '\'{"chunk-size": 250}\'')
    given.add_argument("--parameters-file", type=Path, help="a JSON file of parameters")
    given.add_argument("--param", action="append", metavar="NAME=VALUE",
                       help="one parameter (repeat for more)")
    args = arguments.parse_args(argv)
    try:
        parameters = parameters_of(args)
    except ValueError as error:
        arguments.error(str(error))

    async def start() -> None:
        async with connect(args) as client:
            await client.start_flow(args.flow_id, args.blueprint_name, args.description,
                                    parameters)
        print(f"flow {args.flow_id} started from blueprint {args.blueprint_name}", flush=True)

    return run(prog, start())


def parameters_of(args: argparse.Namespace) -> dict[str, Any]:
    """The parameters as given (``ValueError`` saying what is wrong with them)."""
    if args.param:
        pairs = [param.partition("=") for param in args.param]
        if bad := [name for name, equals, _ in pairs if not equals or not name.strip()]:
            raise ValueError(f"--param {bad[0]!r}: expected NAME=VALUE")
        return {name.strip(): value.strip() for name, _, value in pairs}
    if args.parameters_file is not None:
        text = args.parameters_file.read_text()
    elif args.parameters is not None:
        text = args.parameters
    else:
        return {}
    try:
        parameters = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"parameters: not JSON: {error}") from None
    if not isinstance(parameters, dict):
        raise ValueError("parameters: a JSON object of name: value")
    return parameters


def stop_flow_main(argv: list[str] | None = None) -> int:
    prog = "tg-stop-flow"
    arguments = parser(prog, "Stop a flow: its new requests are refused, answers in "
                             "flight finish, and documents waiting in its pipeline stay "
                             "there until it is started again.", flow=False)
    arguments.add_argument("-i", "--flow-id", required=True, help="the flow to stop")
    args = arguments.parse_args(argv)

    async def stop() -> None:
        async with connect(args) as client:
            await client.stop_flow(args.flow_id)
        print(f"flow {args.flow_id} stopped", flush=True)

    return run(prog, stop())


def get_blueprint_main(argv: list[str] | None = None) -> int:
    prog = "tg-get-flow-blueprint"
    args = _blueprint_parser(prog, "Print a flow blueprint as JSON (tg-put-flow-blueprint "
                                   "takes it back).").parse_args(argv)

    async def get() -> None:
        async with connect(args) as client:
            print_json(await client.get_blueprint(args.blueprint_name))

    return run(prog, get())


def put_blueprint_main(argv: list[str] | None = None) -> int:
    prog = "tg-put-flow-blueprint"
    arguments = _blueprint_parser(prog, "Create or replace a flow blueprint: its "
                                        "processors, parameters and interfaces (flows "
                                        "already started from it run on as they were).")
    arguments.add_argument("-c", "--config", required=True,
                           help="the blueprint as JSON (as tg-get-flow-blueprint prints)")
    args = arguments.parse_args(argv)
    try:
        definition = json.loads(args.config)
    except json.JSONDecodeError as error:
        arguments.error(f"--config: not JSON: {error}")

    async def put() -> None:
        async with connect(args) as client:
            await client.put_blueprint(args.blueprint_name, definition)
        print(f"blueprint {args.blueprint_name} stored", flush=True)

    return run(prog, put())


def delete_blueprint_main(argv: list[str] | None = None) -> int:
    prog = "tg-delete-flow-blueprint"
    args = _blueprint_parser(prog, "Delete a flow blueprint (refused while a flow "
                                   "started from it runs).").parse_args(argv)

    async def delete() -> None:
        async with connect(args) as client:
            await client.delete_blueprint(args.blueprint_name)
        print(f"blueprint {args.blueprint_name} deleted", flush=True)

    return run(prog, delete())
