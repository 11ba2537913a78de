"""A flow's parameters, checked against its blueprint at ``start-flow``: converted to
their declared types (TrustGraph's CLI sends strings), defaults filled in, and every
problem a ``bad-request`` naming the parameter."""
import pytest

from trustgraph.base import BadRequest
from trustgraph.config.default_flow import PARAMETER_TYPES, default_blueprint
from trustgraph.config.flow_service import flow_definition, parsed_blueprint
from trustgraph.config.parameters import resolved
from trustgraph.schema.flows import Blueprint, ParameterType

BLUEPRINT = Blueprint.model_validate({
    "processors": ["decoder"],
    "parameters": {
        "chunk-size": {"type": "chunk-size"},
        "temperature": {"type": "temperature"},
        "rerank": {"type": "rerank"},
        "retrieval-mode": {"type": "retrieval-mode"},
        "extractor": {"type": "extractor", "default": "keyphrase"},
        "llm-model": {"type": "llm-model"},
    }})


def check(**given):
    return resolved("test", BLUEPRINT, PARAMETER_TYPES, given)


def test_strings_become_their_declared_types_and_defaults_fill_the_rest():
    assert check(**{"chunk-size": "250", "temperature": "0.7", "rerank": "true"}) == {
        "chunk-size": 250, "temperature": 0.7, "rerank": True,
        "retrieval-mode": "document",  # the type's default
        "extractor": "keyphrase",  # the blueprint's default, over the type's none
    }  # llm-model: no default anywhere, so the processor's setting applies


def test_typed_values_are_taken_as_they_are():
    assert check(**{"chunk-size": 300, "temperature": 1, "rerank": False,
                    "llm-model": "gpt-x"})["llm-model"] == "gpt-x"


@pytest.mark.parametrize(("given", "says"), [
    ({"chunk-size": "big"}, "parameter chunk-size: 'big' is not an integer"),
    ({"chunk-size": "2.5"}, "parameter chunk-size: '2.5' is not an integer"),
    ({"chunk-size": "4"}, "parameter chunk-size: 4 is below the minimum 16"),
    ({"temperature": "3"}, "parameter temperature: 3.0 is above the maximum 2"),
    ({"rerank": "perhaps"}, "parameter rerank: 'perhaps' is not a boolean"),
    ({"extractor": "magic"}, "parameter extractor: 'magic' is not one of nounphrase, "
                             "keyphrase, llm"),
    ({"chunk-size": [1]}, "parameter chunk-size: an integer value, not list"),
    ({"colour": "red"}, "parameters: colour not declared by blueprint 'test'"),
])
def test_a_bad_parameter_is_refused_naming_it(given, says):
    with pytest.raises(BadRequest, match="^" + says.replace("(", r"\(").replace(".", r"\.")):
        check(**given)


def test_a_parameter_of_an_unknown_type_is_refused():
    blueprint = Blueprint.model_validate({"processors": ["x"],
                                          "parameters": {"p": {"type": "no-such"}}})
    with pytest.raises(BadRequest, match="parameter p: its type 'no-such' is not a "
                                         "parameter-type"):
        resolved("b", blueprint, PARAMETER_TYPES, {})


def test_a_required_parameter_without_a_value_is_refused():
    types = {"name": ParameterType(type="string", description="who", required=True)}
    blueprint = Blueprint.model_validate({"processors": ["x"],
                                          "parameters": {"owner": {"type": "name"}}})
    with pytest.raises(BadRequest, match="parameter owner is required"):
        resolved("b", blueprint, types, {})


@pytest.mark.parametrize(("text", "says"), [
    ("not json", "blueprint-definition: Invalid JSON"),
    ("[1]", "blueprint-definition: Input should be an object"),
    ('{"processors": "decoder"}', "blueprint-definition.processors: Input should be a "
                                  "valid array"),
    ('{"description": "no processors"}', "blueprint-definition.processors: name the "
                                         "processors"),
])
def test_a_blueprint_that_cannot_run_is_refused_saying_why(text, says):
    with pytest.raises(BadRequest, match="^" + says.replace(".", r"\.")):
        parsed_blueprint(text)


def test_the_default_flow_is_the_default_stack_with_its_interfaces_named():
    blueprint = default_blueprint()
    assert {"prompt", "text-completion", "decoder", "extract", "vector-store",
            "librarian"} <= set(blueprint.processors)
    assert "config" not in blueprint.processors and "gateway" not in blueprint.processors
    flow = flow_definition("f1", "default", blueprint, "d", {}, PARAMETER_TYPES)
    assert flow.parameters == {"retrieval-mode": "document"}
    assert flow.interfaces["graph-rag"].request == "non-persistent://tg/request/graph-rag:f1"
    # every parameter's type is one the seed writes
    assert {p.type for p in blueprint.parameters.values()} <= set(PARAMETER_TYPES)
