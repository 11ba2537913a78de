"""Prompt templates without a bus: rendering, strict variables, the sandbox, and
parsing/validating the model's JSON answers; the shipped defaults all work."""
import json

import pytest

from trustgraph.base import HandledError
from trustgraph.prompt.agent_templates import AGENT_TEMPLATES
from trustgraph.prompt.defaults import DEFAULT_TEMPLATES, default_values
from trustgraph.prompt.service import request_variables
from trustgraph.prompt.templates import PromptError, Templates, compile_template
from trustgraph.retrieval.document_rag.service import document_variables
from trustgraph.retrieval.graph_rag.service import kg_variables
from trustgraph.schema import PromptRequest, prompt_config

PAIRS = {"type": "array", "items": {
    "type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"]}}


def template(prompt: str, **fields):
    return compile_template("t", {"prompt": prompt, **fields})


def test_render_system_and_prompt():
    t = template("Hello {{ who }}, {{ items | json }}", system="Be {{ mood }}.")
    assert t.render({"who": "Ann", "mood": "brief", "items": ["é", 1]}) == (
        "Be brief.", 'Hello Ann, ["é", 1]')


def test_undefined_variable_is_named():
    with pytest.raises(PromptError) as failure:
        template("Answer {{ query }} from {{ documents }}").render({"query": "q"})
    assert failure.value.type == "bad-request"
    assert "variable 'documents' is undefined" in failure.value.message
    assert "the request gave: query" in failure.value.message


def test_optional_variables_use_is_defined():
    t = template("{% if extra is defined %}{{ extra }}{% else %}none{% endif %}")
    assert t.render({})[1] == "none"
    assert t.render({"extra": "x"})[1] == "x"


def test_sandbox_refuses_internals():
    with pytest.raises(PromptError, match="failed to render"):
        template("{{ x.__class__.__mro__[1].__subclasses__() }}").render({"x": ""})


def test_invalid_templates_are_reported_by_id():
    with pytest.raises(PromptError, match="template 't' in config is invalid"):
        template("{% if %}")
    with pytest.raises(PromptError, match="invalid"):
        template("x", response_type="yaml")
    with pytest.raises(PromptError, match="invalid"):
        template("x", response_type="json", schema={"type": "no-such-type"})


def test_templates_keep_valid_ones_and_explain_broken_ones():
    templates = Templates({"good": {"prompt": "hi"}, "bad": {"prompt": "{{"}})
    assert templates.get("good").render({}) == ("", "hi")
    with pytest.raises(PromptError, match="'bad' in config is invalid"):
        templates.get("bad")
    with pytest.raises(PromptError, match=r"no prompt template 'nope' \(known: bad, good\)"):
        templates.get("nope")


@pytest.mark.parametrize("answer", [
    '[{"name": "a", "age": 1}]',
    '```json\n[{"name": "a", "age": 1}]\n```',
    'Here you are:\n```\n[{"name": "a", "age": 1}]\n```\nAnything else?',
    'Sure! [{"name": "a", "age": 1}] Hope that helps.',
])
def test_json_answer_parsed_from_fences_and_prose(answer):
    t = template("x", response_type="json", schema=PAIRS)
    assert t.parse(answer) == [{"name": "a", "age": 1}]


def test_json_schema_violation_names_the_place():
    t = template("x", response_type="json", schema=PAIRS)
    with pytest.raises(PromptError) as failure:
        t.parse('[{"name": "a", "age": 1}, {"name": "b", "age": "old"}]')
    assert "does not match its schema at /1/age" in failure.value.message
    assert "'old' is not of type 'integer'" in failure.value.message


def test_bad_json_is_a_clear_error():
    with pytest.raises(PromptError, match="is not valid JSON .*'not json at all'"):
        template("x", response_type="json").parse("not json at all")


def test_jsonl_parses_each_line_and_checks_each_item():
    t = template("x", response_type="jsonl", schema=PAIRS["items"])
    assert t.parse('```\n{"name": "a", "age": 1}\n\n{"name": "b", "age": 2}\n```') == [
        {"name": "a", "age": 1}, {"name": "b", "age": 2}]
    with pytest.raises(PromptError, match="line 2"):
        t.parse('{"name": "a", "age": 1}\n{"name": ')
    with pytest.raises(PromptError, match="item 1 .* at /age"):
        t.parse('{"name": "a", "age": 1}\n{"name": "b", "age": "x"}')


def test_terms_are_json_decoded_and_variables_win():
    request = PromptRequest(id="t", terms={"a": '[1, 2]', "b": '"x"'}, variables={"b": "y"})
    assert request_variables(request) == {"a": [1, 2], "b": "y"}
    with pytest.raises(HandledError, match="term 'a' is not JSON-encoded"):
        request_variables(PromptRequest(id="t", terms={"a": "not json"}))


def test_request_accepts_both_spellings_and_template_both_schema_names():
    t = compile_template("t", {"prompt": "x", "response-type": "json", "schema": PAIRS})
    assert t.response_type == "json" and t.validator is not None
    assert t.definition.config_value()["schema"] == PAIRS


def test_the_shipped_defaults():
    assert set(DEFAULT_TEMPLATES) == {
        "kg-prompt", "document-prompt", "extract-definitions", "extract-relationships",
        "query-rewrite", "query-decompose", "lazy-rag-summary", "rerank", "eval-judge",
        *AGENT_TEMPLATES}
    templates = Templates(default_values())
    examples = {
        "kg-prompt": kg_variables("Who founded Acme?", [("Acme", "founded by", "Ann")]),
        "document-prompt": document_variables("What is X?", ["X is a thing."]),
        "extract-definitions": {"text": "Acme is a maker of anvils."},
        "extract-relationships": {"text": "Acme is based in Leeds."},
        "query-rewrite": {"query": "so what about acme then?"},
        "query-decompose": {"query": "Who founded Acme and where?"},
        "agent-react": {"question": "2+2?", "tools": [{"name": "calc", "description": "d"}]},
        "lazy-rag-summary": {"query": "q", "entities": ["Acme"],
                             "relationships": [{"s": "Acme", "p": "in", "o": "Leeds"}]},
        "rerank": {"query": "q", "passages": [{"n": 1, "title": "T", "text": "x"}]},
        "eval-judge": {"question": "q", "answer": "a", "sources": ["s"]},
    }
    for id, variables in examples.items():
        system, prompt = templates.get(id).render(variables)
        assert system and prompt, id
    assert "Acme | founded by | Ann" in templates.get("kg-prompt").render(examples["kg-prompt"])[1]
    assert "[1]\nX is a thing." in templates.get("document-prompt").render(
        examples["document-prompt"])[1]
    assert "at most 2 simpler" in templates.get("query-decompose").render(
        {"query": "q", "max_subqueries": 2})[1]
    assert "[1] (T) x\n" in templates.get("rerank").render(examples["rerank"])[1]
    judged = templates.get("eval-judge").render({**examples["eval-judge"], "reference": "r"})
    assert "A reference answer: r" in judged[1] and "judged" in judged[1]
    assert "- calc: d\n" in templates.get("agent-react").render(examples["agent-react"])[1]
    history = {**examples["agent-react"], "history": [
        {"thought": "t", "action": "calc", "arguments": {"e": "2+2"}, "observation": "4"}]}
    assert 'Tool: calc {"e": "2+2"}\nObservation: 4' in templates.get("agent-react").render(
        history)[1]


def test_every_shipped_json_template_has_a_schema_that_bounds_its_answer():
    # A model held to the schema ends its answer: every string and list is bounded.
    def bounded(schema):
        kind = schema.get("type")
        if kind == "string" and "enum" not in schema:
            assert schema.get("maxLength"), schema
        if kind == "array":
            assert schema.get("maxItems") and bounded(schema["items"]) is None, schema
        for inner in (schema.get("properties") or {}).values():
            bounded(inner)
    shaped = {id: template.json_schema for id, template in DEFAULT_TEMPLATES.items()
              if template.response_type != "text"}
    assert set(shaped) == {"extract-definitions", "extract-relationships", "query-rewrite",
                           "query-decompose", "rerank", "eval-judge", "agent-classify"}
    for id, schema in shaped.items():
        assert schema is not None, id
        bounded(schema)
    assert shaped["agent-classify"]["properties"]["route"]["enum"] == [
        "knowledge", "code", "conversational"]


def test_default_json_schemas_accept_their_own_examples():
    relationships = compile_template("r", default_values()["extract-relationships"])
    assert relationships.parse(json.dumps([{"subject": "A", "predicate": "in", "object": "B",
                                            "object-entity": True}]))[0]["object"] == "B"
    with pytest.raises(PromptError, match="object-entity"):
        relationships.parse('[{"subject": "A", "predicate": "in", "object": "B"}]')
    definitions = compile_template("d", default_values()["extract-definitions"])
    assert definitions.parse("[]") == []
    decompose = compile_template("q", default_values()["query-decompose"])
    assert decompose.parse('["a?", "b?"]') == ["a?", "b?"]
    with pytest.raises(PromptError):
        decompose.parse("[]")


def test_the_shared_system_prompt_is_for_templates_without_their_own():
    """Config's ``system`` (TrustGraph's layout): templates by id (``template.<id>``
    winning over a plain ``<id>``), and the system prompt of those with none."""
    values, system = prompt_config({
        "system": "Be brief.", "template.a": {"prompt": "A {{ x }}"},
        "a": {"prompt": "old"}, "b": {"prompt": "B", "system": "Own."}})
    assert (sorted(values), system) == (["a", "b"], "Be brief.")
    templates = Templates(values, system)
    assert templates.get("a").render({"x": 1}) == ("Be brief.", "A 1")
    assert templates.get("b").render({}) == ("Own.", "B")
    assert prompt_config({"system": {"not": "a string"}})[1] == ""
