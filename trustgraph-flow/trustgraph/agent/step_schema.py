"""The JSON Schema each ReAct step is generated under (DESIGN §4): a ``thought``,
then ``next``: one of the offered tools (its name an enum of one, so a placeholder
or an invented tool cannot be called) with arguments that fit that tool's declared
parameters, or the ``final_answer``.

    {"thought": "...", "next": {"tool": "document-query", "arguments": {"question": "..."}}}
    {"thought": "...", "next": {"final_answer": "..."}}

The thought comes first so that it streams before anything else. Every object is
closed and every property required (strict mode's rule at OpenAI), and every string
bounded: a model held to the schema ends its step in a bounded number of tokens.
"""
from typing import Any

from trustgraph.prompt.shapes import text
from trustgraph.schema.tool import ToolArgument, ToolDefinition

THOUGHT_CHARS = 600
ARGUMENT_CHARS = 500  # a string argument (a question for a RAG tool)
ANSWER_CHARS = 2000  # the default of AGENT_ANSWER_CHARS
# Declared argument types (ToolArgument.type, a JSON Schema type name) as schemas;
# any other name is a string.
TYPES: dict[str, dict[str, Any]] = {
    "integer": {"type": "integer"}, "number": {"type": "number"},
    "boolean": {"type": "boolean"}, "array": {"type": "array"}, "object": {"type": "object"}}


def step_schema(tools: dict[str, ToolDefinition], answer_only: bool = False,
                answer_chars: int = ANSWER_CHARS) -> dict[str, Any]:
    """A step's schema: a thought, then a call of one of ``tools`` or the final
    answer (at most ``answer_chars``); ``answer_only`` (or no tools): the answer."""
    choices = [] if answer_only else [_call(tool) for tool in tools.values()]
    choices.append(_closed({"final_answer": text(answer_chars)}))
    return _closed({"thought": text(THOUGHT_CHARS),
                    "next": choices[0] if len(choices) == 1 else {"anyOf": choices}})


def _call(tool: ToolDefinition) -> dict[str, Any]:
    return _closed({"tool": {"type": "string", "enum": [tool.name]},
                    "arguments": _closed({argument.name: _argument(argument)
                                          for argument in tool.arguments})})


def _argument(argument: ToolArgument) -> dict[str, Any]:
    schema = dict(TYPES.get(argument.type) or text(ARGUMENT_CHARS))
    if argument.description:
        schema["description"] = argument.description
    return schema


def _closed(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}
