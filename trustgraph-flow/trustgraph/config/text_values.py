"""Config values as TrustGraph's client and CLI write and read them (a request's
``value_format`` ``text``): each value a string of JSON text. Stored values stay JSON,
so our own clients and every processor read the same item either way.

* A ``put`` value that is a string holding JSON is stored as that JSON value:
  ``'{"prompt": "..."}'`` is the object, ``'"You are..."'`` the string. A string that
  is not JSON (``gpt-4``) is stored as that string.
* Every value read is answered as its JSON text: the object as ``'{"prompt": ...}'``,
  the string ``gpt-4`` as ``'"gpt-4"'``.
"""
import json

from pydantic import JsonValue

from trustgraph.schema import ConfigResponse, ConfigValue


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")  # NaN, Infinity: Python's, not JSON's


def parsed(value: JsonValue) -> JsonValue:
    """A value as TrustGraph's client puts it, as stored."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value, parse_constant=_not_json)
    except (ValueError, RecursionError):
        return value


def as_text(value: JsonValue) -> str:
    return json.dumps(value, ensure_ascii=False)


def stored(values: list[ConfigValue]) -> list[ConfigValue]:
    return [v.model_copy(update={"value": parsed(v.value)}) for v in values]


def answered(response: ConfigResponse) -> ConfigResponse:
    """``response`` with every value it carries as JSON text."""
    update: dict = {}
    if response.values is not None:
        update["values"] = [v.model_copy(update={"value": as_text(v.value)})
                            for v in response.values]
    if response.config is not None:
        update["config"] = {type: {key: as_text(value) for key, value in items.items()}
                            for type, items in response.config.items()}
    return response.model_copy(update=update) if update else response
