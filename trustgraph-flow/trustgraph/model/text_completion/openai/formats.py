"""How each server with the OpenAI chat API takes the JSON Schema an answer must
match (``Options.schema``, an object at its root): the body fields the adapter adds.
The servers share the API's shape, not this part of it (docs/providers).

OpenAI's strict mode takes a subset of JSON Schema: every object closed
(``additionalProperties: false``) with every property required, and not every
keyword (no string lengths, for one). A schema that fits is sent strict, without
the keywords strict mode does not take (text-completion checks those afterwards);
one that does not fit is sent as it is, not strict: a guide the model follows, and
the check after it.
"""
from collections.abc import Callable
from typing import Any

SchemaFormat = Callable[[dict[str, Any]], dict[str, Any]]

NAME = "answer"  # what the response format is called (OpenAI requires a name)
# Keywords strict mode takes; the others are left out of what it is sent.
STRICT_KEYWORDS = frozenset((
    "type", "properties", "required", "additionalProperties", "items", "enum", "const",
    "anyOf", "description", "title", "$defs", "$ref", "minItems", "maxItems", "minimum",
    "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "pattern", "format"))


def openai_strict(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAI, Azure OpenAI and Mistral: ``response_format`` ``json_schema``, strict
    when the schema fits strict mode."""
    strict = strict_form(schema)
    return {"response_format": {"type": "json_schema", "json_schema": {
        "name": NAME, "schema": schema if strict is None else strict,
        "strict": strict is not None}}}


def json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """vLLM and LM Studio: ``response_format`` ``json_schema`` with the schema as it
    is; their grammar engines take the whole of it."""
    return {"response_format": {"type": "json_schema",
                                "json_schema": {"name": NAME, "schema": schema}}}


def tgi_grammar(schema: dict[str, Any]) -> dict[str, Any]:
    """Text Generation Inference: its grammar, ``response_format`` ``{"type":
    "json_object", "value": <schema>}``."""
    return {"response_format": {"type": "json_object", "value": schema}}


def llama_cpp(schema: dict[str, Any]) -> dict[str, Any]:
    """llama.cpp's server (the local provider): its own ``json_schema`` field, turned
    into a grammar that constrains sampling."""
    return {"json_schema": schema}


def llamafile(schema: dict[str, Any]) -> dict[str, Any]:
    """llamafile (the llama.cpp server it bundles): ``response_format`` ``{"type":
    "json_object", "schema": <schema>}``, which older llama.cpp servers read too."""
    return {"response_format": {"type": "json_object", "schema": schema}}


def strict_form(schema: Any) -> dict[str, Any] | None:
    """``schema`` as strict mode takes it, or None when it does not fit (an object
    not closed, a property not required)."""
    if not isinstance(schema, dict):
        return None
    if "properties" in schema or schema.get("type") == "object":
        properties = schema.get("properties") or {}
        if (schema.get("additionalProperties") is not False
                or set(schema.get("required") or ()) != set(properties)):
            return None
    kept: dict[str, Any] = {}
    for keyword, value in schema.items():
        if keyword not in STRICT_KEYWORDS:
            continue
        if keyword in ("properties", "$defs"):
            value = {name: strict_form(inner) for name, inner in value.items()}
            if None in value.values():
                return None
        elif keyword == "items" or keyword == "anyOf":
            inner = [strict_form(each) for each in (value if keyword == "anyOf" else [value])]
            if None in inner:
                return None
            value = inner if keyword == "anyOf" else inner[0]
        kept[keyword] = value
    return kept
