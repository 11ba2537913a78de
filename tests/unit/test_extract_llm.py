"""LLM extraction with a scripted stand-in for the prompt service: good answers
become triples and entities; bad ones are skipped item by item, never failing the
chunk; the bus's own failures are raised so the chunk is redelivered."""
import logging

import pytest

from trustgraph.base import RequestTimeout, ServiceError
from trustgraph.extract.llm import DEFINITIONS, RELATIONSHIPS, llm_graph
from trustgraph.extract.vocabulary import (
    DEFINITION,
    LABEL,
    MENTIONED_IN,
    chunk_iri,
    entity_iri,
    relation_iri,
)
from trustgraph.schema import Chunk, DocumentRef, Error, Term, Triple

CHUNK = Chunk(document=DocumentRef(id="doc-7", title="Curie"), id="doc-7/c0", index=0,
              text="Marie Curie, born in Warsaw on 7 November 1867, was a physicist.")


class ScriptedPrompts:
    """Implements ``PromptClient.prompt``: each template's answer (or exception) is
    given up front; the variables are recorded."""

    def __init__(self, **answers) -> None:
        self.answers = {DEFINITIONS: answers.get("definitions", []),
                        RELATIONSHIPS: answers.get("relationships", [])}
        self.asked: list[tuple[str, dict]] = []

    async def prompt(self, id, variables):
        self.asked.append((id, variables))
        answer = self.answers[id]
        if isinstance(answer, Exception):
            raise answer
        return answer


def iri(name: str) -> Term:
    return Term.iri(entity_iri(name))


def triple(s: Term, p: str, o: Term) -> Triple:
    return Triple(s=s, p=Term.iri(p), o=o)


CURIE = {"entity": "Marie Curie", "definition": "A physicist and chemist."}
BORN_IN = {"subject": "Marie Curie", "predicate": "was born in", "object": "Warsaw",
           "object-entity": True}
BORN_ON = {"subject": "Marie Curie", "predicate": "was born on",
           "object": "7 November 1867", "object-entity": False}


async def extract(prompts: ScriptedPrompts):
    return (await llm_graph(CHUNK, prompts)).records()


async def test_definitions_and_relationships_become_triples_and_entities():
    prompts = ScriptedPrompts(definitions=[CURIE], relationships=[BORN_IN, BORN_ON])
    triples, entities = await extract(prompts)
    found = set(triples.triples)
    curie, warsaw = iri("Marie Curie"), iri("Warsaw")
    born_in, born_on = relation_iri("was born in"), relation_iri("was born on")
    assert {
        triple(curie, LABEL, Term.literal("Marie Curie")),
        triple(curie, DEFINITION, Term.literal("A physicist and chemist.")),
        triple(curie, MENTIONED_IN, Term.iri(chunk_iri(CHUNK.id))),
        triple(curie, born_in, warsaw),
        triple(warsaw, LABEL, Term.literal("Warsaw")),
        triple(warsaw, MENTIONED_IN, Term.iri(chunk_iri(CHUNK.id))),
        triple(curie, born_on, Term.literal("7 November 1867")),
        triple(Term.iri(born_in), LABEL, Term.literal("was born in")),
    } <= found
    assert not any(t.s == iri("7 November 1867") for t in found)  # a value, not an entity
    assert [(e.entity, e.label, e.definition) for e in entities.entities] == [
        (curie, "Marie Curie", "A physicist and chemist."), (warsaw, "Warsaw", "")]
    assert sorted(id for id, _ in prompts.asked) == [DEFINITIONS, RELATIONSHIPS]
    assert all(variables == {"text": CHUNK.text} for _, variables in prompts.asked)


async def test_names_are_tidied_and_one_entity_has_one_iri():
    prompts = ScriptedPrompts(
        definitions=[{"entity": " marie\n curie ", "definition": "A  physicist."}],
        relationships=[{**BORN_IN, "subject": "MARIE CURIE"}])
    triples, entities = await extract(prompts)
    assert [e.label for e in entities.entities] == ["marie curie", "Warsaw"]
    assert entities.entities[0].definition == "A physicist."
    subjects = {t.s for t in triples.triples if t.p.i == relation_iri("was born in")}
    assert subjects == {iri("Marie Curie")}


async def test_a_later_definition_completes_an_entity_first_seen_without_one():
    prompts = ScriptedPrompts(
        definitions=[CURIE, {"entity": "Warsaw", "definition": "The capital of Poland."}],
        relationships=[BORN_IN])
    _, entities = await extract(prompts)
    assert {e.label: e.definition for e in entities.entities}["Warsaw"] == \
        "The capital of Poland."


@pytest.mark.parametrize("bad", [
    {"entity": "No definition"},
    {"definition": "No entity."},
    {"entity": "", "definition": "Empty name."},
    {"entity": "   ", "definition": "Blank name."},
    {"entity": ["a", "list"], "definition": "Wrong type."},
    {"entity": "x" * 500, "definition": "Name far too long."},
    {"entity": "?!", "definition": "A name without letters."},
    "Marie Curie: a physicist",
    None,
    42,
])
async def test_bad_definition_items_are_skipped(bad, caplog):
    prompts = ScriptedPrompts(definitions=[bad, CURIE])
    with caplog.at_level(logging.WARNING):
        _, entities = await extract(prompts)
    assert [e.label for e in entities.entities] == ["Marie Curie"]


@pytest.mark.parametrize("bad", [
    {**BORN_IN, "object-entity": "perhaps"},
    {**BORN_IN, "object-entity": None},
    {k: v for k, v in BORN_IN.items() if k != "object-entity"},
    {k: v for k, v in BORN_IN.items() if k != "predicate"},
    {**BORN_IN, "predicate": "--"},
    {**BORN_IN, "subject": "..."},
    {**BORN_IN, "object": ""},
    {**BORN_IN, "object": {"nested": True}},
    ["Marie Curie", "was born in", "Warsaw"],
])
async def test_bad_relationship_items_are_skipped(bad):
    prompts = ScriptedPrompts(relationships=[bad, BORN_ON])
    triples, _ = await extract(prompts)
    predicates = {t.p.i for t in triples.triples}
    assert relation_iri("was born on") in predicates
    assert relation_iri("was born in") not in predicates


async def test_lenient_booleans_are_read():
    prompts = ScriptedPrompts(relationships=[{**BORN_IN, "object-entity": "true"},
                                             {**BORN_ON, "object-entity": "no"}])
    triples, _ = await extract(prompts)
    objects = {t.p.i: t.o for t in triples.triples}
    assert objects[relation_iri("was born in")] == iri("Warsaw")
    assert objects[relation_iri("was born on")] == Term.literal("7 November 1867")


@pytest.mark.parametrize("answer", ["I could not find any entities.", {"a": 1, "b": 2}, 3,
                                    None, {}])
async def test_an_answer_that_is_not_a_list_is_skipped(answer):
    triples, _ = await extract(ScriptedPrompts(definitions=answer, relationships=[BORN_ON]))
    assert {t.p.i for t in triples.triples} >= {relation_iri("was born on")}
    assert DEFINITION not in {t.p.i for t in triples.triples}


async def test_a_list_wrapped_in_an_object_is_read():
    triples, _ = await extract(ScriptedPrompts(definitions={"definitions": [CURIE]}))
    assert DEFINITION in {t.p.i for t in triples.triples}


@pytest.mark.parametrize("error_type", ["prompt-error", "llm-error"])
async def test_a_failed_template_is_skipped_and_the_other_still_counts(error_type):
    failure = ServiceError(Error(type=error_type, message="not valid JSON"))
    triples, entities = await extract(ScriptedPrompts(definitions=failure,
                                                      relationships=[BORN_IN]))
    assert relation_iri("was born in") in {t.p.i for t in triples.triples}
    assert [e.definition for e in entities.entities] == ["", ""]

    triples, _ = await extract(ScriptedPrompts(definitions=[CURIE], relationships=failure))
    assert DEFINITION in {t.p.i for t in triples.triples}


async def test_nothing_found_gives_no_records():
    failure = ServiceError(Error(type="prompt-error", message="bad"))
    assert await extract(ScriptedPrompts()) is None
    assert await extract(ScriptedPrompts(definitions=failure, relationships=failure)) is None


@pytest.mark.parametrize("failure", [
    RequestTimeout("no answer from prompt in 120 s"),
    ServiceError(Error(type="responses-lost", message="1 response record(s) lost")),
])
async def test_a_failure_of_the_bus_is_raised_for_redelivery(failure):
    with pytest.raises(type(failure)):
        await extract(ScriptedPrompts(definitions=[CURIE], relationships=failure))
