"""Answers under a JSON Schema (a request's ``json_schema``): what a provider is
asked for, and the check every such answer passes before it leaves text-completion.

A provider is given the schema with an object at its root (``Shape.sent``): OpenAI's
strict mode, Anthropic's and Bedrock's tool input and Cohere's ``json_object`` take
nothing else, so a schema whose root is another type (an array of questions, a
string) is asked for as ``{"value": <it>}`` and the answer unwrapped here.

Each provider asks its server to constrain the answer by the server's own mechanism
(docs/providers), but an answer is still checked against the schema as asked: a
constrained answer can be cut short at ``max_tokens``, and a server may honour only
part of JSON Schema (OpenAI's strict mode takes no string lengths). Whatever a
server does, a caller never gets unparseable or off-schema JSON as an answer: it
gets ``OffSchema``, which says what is wrong and where.
"""
import functools
import json
import re
from dataclasses import dataclass
from typing import Any

import jsonschema
from pydantic_core import from_json

from trustgraph.base import BadRequest, HandledError
from trustgraph.schema.text_completion import OFF_SCHEMA, OFF_SCHEMA_SUBJECT

WRAPPER = "value"  # the property a schema without an object root is asked for under
SHOWN = 200  # characters of a bad answer quoted in its error
_FENCED = re.compile(r"```[a-zA-Z]*\s*\n?(.*?)```", re.DOTALL)


class OffSchema(HandledError):
    """The model's answer is not JSON that matches the schema it was asked for."""

    def __init__(self, message: str) -> None:
        super().__init__(OFF_SCHEMA, message)


@dataclass(frozen=True)
class Shape:
    asked: dict[str, Any]  # the schema as the request gave it
    sent: dict[str, Any]  # what providers are given: an object at its root
    validator: Any  # a jsonschema validator of ``asked``

    @property
    def wrapped(self) -> bool:
        return self.sent is not self.asked

    def answer(self, text: str) -> str:
        """The answer ``text`` (under ``sent``, or as asked) as compact JSON of the
        value asked for, or ``OffSchema`` saying why it is not one."""
        try:
            value = from_json(text.strip())
        except ValueError:
            try:  # a server that let the model wrap it in a fence or a sentence
                value = from_json(json_in(text))
            except ValueError as error:
                raise OffSchema(f"{OFF_SCHEMA_SUBJECT} is not valid JSON ({error}; cut "
                                f"short at max_tokens?): {_shown(text)}") from None
        if self.wrapped and isinstance(value, dict) and WRAPPER in value:
            value = value[WRAPPER]  # else a server that let the model leave it out
        problem = jsonschema.exceptions.best_match(self.validator.iter_errors(value))
        if problem is not None:
            where = "/" + "/".join(str(part) for part in problem.absolute_path)
            raise OffSchema(f"{OFF_SCHEMA_SUBJECT} does not match its schema at {where}: "
                            f"{problem.message}")
        return json.dumps(value, ensure_ascii=False)


def shape_of(schema: dict[str, Any]) -> Shape:
    """The shape of a request's schema; ``BadRequest`` when it is no JSON Schema.
    Remembered by its text: the agent sends the same step schema over and over. The
    text keeps the schema's key order, which is the order a server has the model
    write the properties in (the agent's thought first, to stream it first)."""
    return _compiled(json.dumps(schema))


@functools.lru_cache(maxsize=256)
def _compiled(text: str) -> Shape:
    schema = json.loads(text)
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as error:
        raise BadRequest(f"json_schema is not a valid JSON Schema: {error.message}") from None
    sent = schema if schema.get("type") == "object" else {
        "type": "object", "properties": {WRAPPER: schema}, "required": [WRAPPER],
        "additionalProperties": False}
    return Shape(schema, sent, cls(schema))


def unfenced(answer: str) -> str:
    """The content of an answer's first Markdown code fence, if it has one."""
    fenced = _FENCED.search(answer)
    return fenced.group(1).strip() if fenced else answer.strip()


def json_in(answer: str) -> str:
    """The JSON a model wrapped in prose: the content of its first Markdown code fence,
    and of that, from the first bracket to the matching last one (a sentence around
    it). For answers that are not JSON as they stand: JSON can hold a fence too."""
    text = unfenced(answer)
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts or text[:1] in "{[":
        return text
    start = min(starts)
    end = text.rfind("}" if text[start] == "{" else "]")
    return text[start:end + 1] if end > start else text


def correction(prompt: str, problem: str) -> str:
    """The prompt asked again after an answer failed its schema: what was wrong."""
    return (f"{prompt}\n\nYour previous reply could not be used: {problem}. Reply again "
            "with JSON only, matching the required schema exactly.")


def _shown(text: str) -> str:
    return repr(text if len(text) <= SHOWN else text[:SHOWN] + "...")
