"""A request's JSON Schema as text-completion handles it: what providers are sent
(an object at the root, the schema's key order kept), the check of an answer, and
OpenAI's strict form."""
import pytest

from trustgraph.base import BadRequest
from trustgraph.model.text_completion.openai.formats import openai_strict, strict_form
from trustgraph.model.text_completion.structured import OffSchema, shape_of

STEP = {"type": "object", "additionalProperties": False, "required": ["thought", "next"],
        "properties": {"thought": {"type": "string", "maxLength": 5},
                       "next": {"type": "object", "additionalProperties": False,
                                "required": ["final_answer"],
                                "properties": {"final_answer": {"type": "string"}}}}}


def test_an_object_schema_is_sent_as_it_is_in_its_own_key_order():
    shape = shape_of(STEP)
    assert not shape.wrapped and shape.sent == STEP
    # The order a server has the model write the properties in: the thought first.
    assert list(shape.sent["properties"]) == ["thought", "next"]
    assert list(shape.sent) == list(STEP)


def test_another_root_is_sent_wrapped_and_its_answer_unwrapped():
    shape = shape_of({"type": "array", "items": {"type": "integer"}, "maxItems": 2})
    assert shape.wrapped and shape.sent["required"] == ["value"]
    assert shape.answer('{"value": [3, 1]}') == "[3, 1]"
    assert shape.answer("[3, 1]") == "[3, 1]"  # a server that let the wrapper go
    with pytest.raises(OffSchema, match="at /: \\[1, 2, 3\\] is too long"):
        shape.answer('{"value": [1, 2, 3]}')


def test_an_answer_is_checked_and_what_is_wrong_is_said():
    shape = shape_of(STEP)
    assert shape.answer(' {"thought": "t", "next": {"final_answer": "a"}}\n') == \
        '{"thought": "t", "next": {"final_answer": "a"}}'
    with pytest.raises(OffSchema, match="its schema at /thought: 'thinking' is too long"):
        shape.answer('{"thought": "thinking", "next": {"final_answer": "a"}}')
    with pytest.raises(OffSchema, match="not valid JSON .*cut short at max_tokens"):
        shape.answer('{"thought": "t", "next": {"final_ans')
    with pytest.raises(OffSchema) as failure:
        shape.answer("Sure! Here it is.")
    assert failure.value.type == "off-schema"


def test_json_wrapped_in_prose_is_read_out_and_a_fence_inside_json_kept():
    shape = shape_of(STEP)
    wrapped = 'Here:\n```json\n{"thought": "t", "next": {"final_answer": "a"}}\n```\nDone.'
    assert shape.answer(wrapped) == '{"thought": "t", "next": {"final_answer": "a"}}'
    code = '{"thought": "t", "next": {"final_answer": "```sh\\nls\\n```"}}'
    assert shape.answer(code) == code


def test_a_schema_that_is_no_json_schema_is_a_bad_request():
    with pytest.raises(BadRequest, match="not a valid JSON Schema"):
        shape_of({"type": "objekt"})


def test_strict_mode_gets_what_it_takes_or_the_schema_goes_as_a_guide():
    strict = strict_form(STEP)
    assert strict is not None and "maxLength" not in strict["properties"]["thought"]
    assert openai_strict(STEP)["response_format"]["json_schema"]["strict"] is True
    open_object = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert strict_form(open_object) is None  # not closed, not all required
    sent = openai_strict(open_object)["response_format"]["json_schema"]
    assert sent == {"name": "answer", "schema": open_object, "strict": False}
    nested = {**STEP, "properties": {**STEP["properties"], "next": {"anyOf": [
        {"type": "object", "properties": {"x": {"type": "string"}}}]}}}
    assert strict_form(nested) is None
