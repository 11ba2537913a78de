"""A flow's parameter values, checked against its blueprint before it starts.

``resolved`` gives every parameter the blueprint declares its value, converted to its
declared type (TrustGraph's CLI sends every value as a string), or its default
(the blueprint's, else its type's); a parameter with neither is left out, and the
processor's own setting applies. Any problem is one ``BadRequest`` naming the
parameter, raised before anything is stored: a flow never starts half-checked.
"""
import math
import re
from collections.abc import Mapping

from pydantic import JsonValue

from trustgraph.base import BadRequest
from trustgraph.schema.flows import Blueprint, ParameterType

TRUE = ("true", "yes", "on", "1")
FALSE = ("false", "no", "off", "0")


def resolved(blueprint_name: str, blueprint: Blueprint, types: Mapping[str, ParameterType],
             given: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """Each declared parameter's typed value (given, else its default)."""
    declared = blueprint.parameters
    if unknown := sorted(set(given) - set(declared)):
        raise BadRequest(f"parameters: {', '.join(unknown)} not declared by blueprint "
                         f"{blueprint_name!r} (it declares: "
                         f"{', '.join(sorted(declared)) or 'none'})")
    values: dict[str, JsonValue] = {}
    for name, parameter in declared.items():
        kind = types.get(parameter.type)
        if kind is None:
            raise BadRequest(f"parameter {name}: its type {parameter.type!r} is not a "
                             f"parameter-type in config")
        if name in given:
            values[name] = converted(name, given[name], kind)
            continue
        default = parameter.default if parameter.default is not None else kind.default
        if default is not None:
            values[name] = converted(name, default, kind)
        elif kind.required:
            raise BadRequest(f"parameter {name} is required ({kind.description})")
    return values


def converted(name: str, value: JsonValue, kind: ParameterType) -> JsonValue:
    """``value`` as ``kind``'s type, within its constraints."""
    typed = _as_type(name, value, kind)
    if (choices := kind.choices()) and typed not in choices:
        raise BadRequest(f"parameter {name}: {typed!r} is not one of {', '.join(choices)}")
    if isinstance(typed, int | float) and not isinstance(typed, bool):
        if kind.minimum is not None and typed < kind.minimum:
            raise BadRequest(f"parameter {name}: {typed} is below the minimum "
                             f"{_number(kind.minimum)}")
        if kind.maximum is not None and typed > kind.maximum:
            raise BadRequest(f"parameter {name}: {typed} is above the maximum "
                             f"{_number(kind.maximum)}")
    if isinstance(typed, str):
        _check_text(name, typed, kind)
    return typed


def _as_type(name: str, value: JsonValue, kind: ParameterType) -> JsonValue:
    if isinstance(value, list | dict) or value is None:
        raise BadRequest(f"parameter {name}: {_a(kind.type)} value, not "
                         f"{type(value).__name__}")
    text = str(value).strip()
    match kind.type:
        case "string":
            return value if isinstance(value, str) else text
        case "boolean":
            if isinstance(value, bool) or text.lower() in TRUE + FALSE:
                return value if isinstance(value, bool) else text.lower() in TRUE
        case "integer":
            number = _parsed(value)
            if number is not None and number == int(number):
                return int(number)
        case "number":
            number = _parsed(value)
            if number is not None:
                return number
    raise BadRequest(f"parameter {name}: {value!r} is not {_a(kind.type)}")


def _parsed(value: JsonValue) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value) if isinstance(value, int | float | str) else None
    except ValueError:
        return None
    return number if number is not None and math.isfinite(number) else None


def _check_text(name: str, text: str, kind: ParameterType) -> None:
    if kind.min_length is not None and len(text) < kind.min_length:
        raise BadRequest(f"parameter {name}: shorter than {kind.min_length} characters")
    if kind.max_length is not None and len(text) > kind.max_length:
        raise BadRequest(f"parameter {name}: longer than {kind.max_length} characters")
    if kind.pattern is not None and not re.fullmatch(kind.pattern, text):
        raise BadRequest(f"parameter {name}: {text!r} does not match {kind.pattern}")


def _a(type_name: str) -> str:
    return f"an {type_name}" if type_name[0] in "aeiou" else f"a {type_name}"


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)
