"""A ReAct step read as its JSON grows: the thought and the answer passed on as
their strings grow, whatever the deltas' boundaries; the step known at the end; and
the step schema the reply is generated under, from the offered tools."""
import json

import jsonschema
import pytest

from trustgraph.agent.step_reader import StepReader
from trustgraph.agent.step_schema import ANSWER_CHARS, step_schema
from trustgraph.agent.toolbox import DEFAULT_TOOLS
from trustgraph.schema.tool import ToolArgument, ToolDefinition

CALL = {"thought": "I need \"facts\"\nabout it. ", "next": {
    "tool": "knowledge-query", "arguments": {"question": "Who walked? \u00e9\U0001f319"}}}
ANSWER = {"thought": "  Now I know.", "next": {"final_answer": "Neil\tArmstrong \u263e. "}}


def read(text: str, size: int) -> tuple[StepReader, list[tuple[str, str]]]:
    reader = StepReader()
    events = []
    for i in range(0, len(text), size):
        events += reader.feed(text[i:i + size])
    return reader, events + reader.finish()


def joined(events, kind: str) -> str:
    return "".join(text for k, text in events if k == kind)


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
@pytest.mark.parametrize("ascii", [True, False])
def test_a_tool_call_streams_its_thought_then_is_known_at_the_end(size, ascii):
    reader, events = read(json.dumps(CALL, ensure_ascii=ascii), size)
    assert joined(events, "thought") == 'I need "facts"\nabout it.'
    assert [k for k, _ in events].count("thought_end") == 1
    assert events[-1] == ("thought_end", "") and joined(events, "answer") == ""
    step = reader.step
    assert (step.thought, step.tool, step.arguments, step.answer) == (
        'I need "facts"\nabout it.', "knowledge-query", CALL["next"]["arguments"], None)


@pytest.mark.parametrize("size", [1, 4, 1000])
def test_an_answer_streams_after_the_thought_has_ended(size):
    reader, events = read(json.dumps(ANSWER, indent=2), size)
    kinds = [k for k, _ in events]
    assert kinds.index("thought_end") < kinds.index("answer")
    assert joined(events, "thought") == "Now I know."
    assert joined(events, "answer") == reader.step.answer == "Neil\tArmstrong \u263e."


def test_text_is_passed_on_as_soon_as_it_is_there():
    reader = StepReader()
    assert reader.feed('{"thought": "') == []
    assert reader.feed(" I") == [("thought", "I")]
    assert reader.feed(" think\\") == [("thought", " think")]  # the escape waits
    assert reader.feed('n so') == [("thought", "\n so")]
    assert reader.feed('", "next": {"final_answer": "Yes') == [
        ("thought_end", ""), ("answer", "Yes")]


def test_a_reply_that_is_not_json_streams_nothing():
    reader, events = read("Thought: I will not write JSON.", 5)
    assert events == [] and reader.step.answer is None and reader.step.tool == ""


def test_a_step_a_server_let_the_model_wrap_in_prose_is_read_at_the_end():
    reader, events = read("Sure:\n```json\n" + json.dumps(ANSWER) + "\n```", 4)
    assert events == [("thought", "Now I know."), ("thought_end", ""),
                      ("answer", "Neil\tArmstrong \u263e.")]


TOOLS = {tool.name: tool for tool in DEFAULT_TOOLS.values()} | {"add": ToolDefinition(
    name="add", description="Adds.", kind="mcp-tool", url="http://x",
    arguments=[ToolArgument(name="a", type="integer"), ToolArgument(name="b", type="number"),
               ToolArgument(name="note", type="weird")])}


def test_the_step_schema_offers_each_tool_with_its_declared_arguments():
    schema = step_schema(TOOLS)
    valid = jsonschema.Draft202012Validator(schema)
    assert valid.is_valid({"thought": "t", "next": {"tool": "add", "arguments": {
        "a": 1, "b": 2.5, "note": "n"}}})
    assert valid.is_valid(ANSWER)
    for wrong in ({"tool": "add", "arguments": {"a": 1, "b": 2}},  # one missing
                  {"tool": "add", "arguments": {"a": "1", "b": 2, "note": "n"}},  # a type
                  {"tool": "knowledge-query", "arguments": {"question": ""}},  # blank
                  {"tool": "knowledge-query", "arguments": {"query": "q"}},  # undeclared
                  {"tool": "<tool name>", "arguments": {"question": "q"}},  # a placeholder
                  {"final_answer": "x" * (ANSWER_CHARS + 1)}):
        assert not valid.is_valid({"thought": "t", "next": wrong}), wrong
    assert not valid.is_valid({"next": {"final_answer": "a"}})  # no thought
    assert list(schema["properties"]) == ["thought", "next"]  # the thought streams first


def test_an_answer_only_step_offers_no_tool():
    for schema in (step_schema(TOOLS, answer_only=True), step_schema({})):
        valid = jsonschema.Draft202012Validator(schema)
        assert valid.is_valid(ANSWER)
        assert not valid.is_valid(CALL)
