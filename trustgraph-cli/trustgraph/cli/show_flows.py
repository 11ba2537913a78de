"""What runs and what could (docs/flows.md), for people to read; any key may:

* ``tg-show-flows``: each running flow, its blueprint, its parameters (as the
  blueprint describes them) and the topics its interfaces are asked on;
* ``tg-show-flow-blueprints``: each blueprint, its processors and parameters (with
  their types' defaults);
* ``tg-show-parameter-types [-t TYPE]``: what each parameter's value may be.
"""
import asyncio
from typing import Any

from trustgraph.api import TrustGraphError

from .common import connect, parser, run

INDENT = "    "


def show_flows_main(argv: list[str] | None = None) -> int:
    prog = "tg-show-flows"
    args = parser(prog, "Show the running flows: blueprint, description, parameters "
                        "and interfaces.", flow=False).parse_args(argv)

    async def show() -> None:
        async with connect(args) as client:
            flows = await _each(client.get_flow, await client.list_flows())
            names = sorted({flow.get("blueprint-name", "") for flow in flows.values()})
            blueprints = await _each(client.get_blueprint, names, missing_ok=True)
        if not flows:
            print("no flows running", flush=True)
        for flow_id, flow in flows.items():
            blueprint = blueprints.get(flow.get("blueprint-name", "")) or {}
            print(flow_lines(flow_id, flow, blueprint.get("parameters") or {}), flush=True)

    return run(prog, show())


def flow_lines(flow_id: str, flow: dict[str, Any], declared: dict[str, Any]) -> str:
    lines = [flow_id, f"  blueprint    {flow.get('blueprint-name', '')}",
             f"  description  {flow.get('description', '')}", "  parameters"]
    values = flow.get("parameters") or {}
    for name in sorted(values, key=lambda name: (declared.get(name, {}).get("order", 999),
                                                  name)):
        meaning = declared.get(name, {}).get("description") or "(not declared)"
        lines.append(f"{INDENT}{name} = {values[name]}  ({meaning})")
    if not values:
        lines.append(f"{INDENT}none: each processor's own settings")
    lines.append("  interfaces")
    for name, topics in sorted((flow.get("interfaces") or {}).items()):
        request = topics.get("request", "") if isinstance(topics, dict) else topics
        lines.append(f"{INDENT}{name}  {request}")
    return "\n".join(lines) + "\n"


def show_blueprints_main(argv: list[str] | None = None) -> int:
    prog = "tg-show-flow-blueprints"
    args = parser(prog, "Show the flow blueprints: description, processors and the "
                        "parameters a flow started from each takes.",
                  flow=False).parse_args(argv)

    async def show() -> None:
        async with connect(args) as client:
            blueprints = await _each(client.get_blueprint, await client.list_blueprints())
            types = await client.parameter_types()
        if not blueprints:
            print("no flow blueprints", flush=True)
        for name, blueprint in blueprints.items():
            print(blueprint_lines(name, blueprint, types), flush=True)

    return run(prog, show())


def blueprint_lines(name: str, blueprint: dict[str, Any], types: dict[str, Any]) -> str:
    lines = [name, f"  description  {blueprint.get('description', '')}"]
    if tags := blueprint.get("tags"):
        lines.append(f"  tags         {', '.join(tags)}")
    lines.append(f"  processors   {', '.join(blueprint.get('processors') or [])}")
    lines.append("  parameters")
    declared = blueprint.get("parameters") or {}
    for parameter, meta in sorted(declared.items(),
                                  key=lambda item: (item[1].get("order", 999), item[0])):
        kind = meta.get("type", "?")
        default = meta.get("default", (types.get(kind) or {}).get("default"))
        typed = f"{kind}, default {default}" if default is not None else kind
        lines.append(f"{INDENT}{parameter}: {meta.get('description', '')} [{typed}]")
    if not declared:
        lines.append(f"{INDENT}none")
    return "\n".join(lines) + "\n"


def show_parameter_types_main(argv: list[str] | None = None) -> int:
    prog = "tg-show-parameter-types"
    arguments = parser(prog, "Show the parameter types: what a value of each may be "
                             "(its type, default, valid values, limits).", flow=False,
                       token_short=False)
    arguments.add_argument("-t", "--type", help="show only this parameter type")
    args = arguments.parse_args(argv)

    async def show() -> None:
        async with connect(args) as client:
            types = await client.parameter_types()
        if args.type and args.type not in types:
            raise TrustGraphError("not-found", f"no parameter type {args.type!r} (known: "
                                               f"{', '.join(sorted(types)) or 'none'})")
        chosen = {args.type: types[args.type]} if args.type else types
        if not chosen:
            print("no parameter types", flush=True)
        for name in sorted(chosen):
            print(type_lines(name, chosen[name]), flush=True)

    return run(prog, show())


def type_lines(name: str, kind: dict[str, Any]) -> str:
    lines = [name, f"  type         {kind.get('type', 'string')}",
             f"  description  {kind.get('description', '')}"]
    if kind.get("default") is not None:
        lines.append(f"  default      {kind['default']}")
    if values := kind.get("enum"):
        shown = [f"{v['id']} ({v['description']})" if isinstance(v, dict) and
                 v.get("description") else (v["id"] if isinstance(v, dict) else str(v))
                 for v in values]
        lines.append(f"  values       {', '.join(shown)}")
    limits = [f"{label} {kind[key]}" for key, label in (
        ("minimum", "min"), ("maximum", "max"), ("minLength", "min length"),
        ("maxLength", "max length"), ("pattern", "pattern")) if key in kind]
    if limits:
        lines.append(f"  limits       {', '.join(limits)}")
    return "\n".join(lines) + "\n"


async def _each(get: Any, names: list[str], missing_ok: bool = False) -> dict[str, Any]:
    """``get(name)`` for each of ``names`` at once, by name (left out: a name that is
    not found when ``missing_ok``)."""
    results = await asyncio.gather(*(get(name) for name in names),
                                   return_exceptions=missing_ok)
    found = {name: result for name, result in zip(names, results, strict=True)
             if not isinstance(result, BaseException)}
    return found
