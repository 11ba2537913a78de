"""LLM extraction through the prompt service: ``extract-definitions`` gives entities
with definitions, ``extract-relationships`` gives (subject, predicate, object) facts.

Both templates declare their schema (the fields the store needs, bounded), so the
model's server holds its answer to that shape and text-completion checks it. The
items are still checked one by one against what the store takes (a name must make
an IRI): one that does not is skipped. A whole answer that could not be had (off
the schema even when asked again, ``off-schema``; one the prompt service could not
use, ``prompt-error``; the model failing after text-completion's retries,
``llm-error``) is skipped too. A chunk thus yields whatever did succeed, and a
chunk that yields nothing says why in one log line: ingestion never stalls on a
bad answer. Failures of the bus itself (a timeout, responses lost) are raised, so
the stage redelivers the chunk rather than leaving a hole in the graph.
"""
import asyncio
import logging
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from trustgraph.base import PromptClient, ServiceError
from trustgraph.schema import Chunk, Term
from trustgraph.schema.text_completion import OFF_SCHEMA

from .graph import ChunkGraph, tidy
from .vocabulary import LABEL, relation_iri

log = logging.getLogger(__name__)

DEFINITIONS = "extract-definitions"
RELATIONSHIPS = "extract-relationships"
SKIPPED_ERRORS = {"prompt-error", "llm-error", OFF_SCHEMA}

Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1,
                                         max_length=200)]
Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1,
                                         max_length=4000)]
M = TypeVar("M", bound=BaseModel)


class Definition(BaseModel):
    entity: Name
    definition: Text


class Relationship(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    subject: Name
    predicate: Name
    object: Text
    object_entity: bool = Field(alias="object-entity")


async def llm_graph(chunk: Chunk, prompts: PromptClient) -> ChunkGraph:
    reasons: list[str] = []  # why an answer, or an item of one, was not used
    outcomes = await asyncio.gather(
        _ask(prompts, DEFINITIONS, chunk, reasons), _ask(prompts, RELATIONSHIPS, chunk, reasons),
        return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    definitions, relationships = outcomes
    graph = ChunkGraph(chunk)
    found = 0
    for item in _items(definitions, Definition, DEFINITIONS, reasons):
        found += graph.entity(item.entity, item.definition) is not None
    for relationship in _items(relationships, Relationship, RELATIONSHIPS, reasons):
        found += add_relationship(graph, relationship, reasons)
    if not found:
        log.info("%s: nothing extracted: %s", chunk.id,
                 "; ".join(reasons) or "the model found nothing to extract")
    elif reasons:
        log.info("%s: %d items extracted, some skipped: %s", chunk.id, found,
                 "; ".join(reasons))
    return graph


def add_relationship(graph: ChunkGraph, item: Relationship, reasons: list[str]) -> bool:
    """Adds ``item``'s triple; False (with the reason) when it makes none."""
    predicate = relation_iri(item.predicate)
    subject = graph.entity(item.subject)
    if predicate is None or subject is None:
        reasons.append(f"{RELATIONSHIPS}: no usable subject or predicate in {item!r:.120}")
        return False
    thing = graph.entity(item.object) if item.object_entity else None
    graph.add(subject, predicate, thing or Term.literal(tidy(item.object)))
    graph.add(Term.iri(predicate), LABEL, Term.literal(tidy(item.predicate)))
    return True


async def _ask(prompts: PromptClient, template: str, chunk: Chunk, reasons: list[str]
               ) -> Any:
    try:
        return await prompts.prompt(template, {"text": chunk.text})
    except ServiceError as error:
        if error.error.type not in SKIPPED_ERRORS:
            raise
        reasons.append(f"{template} failed: {error.error.type}: {error.error.message}")
        return []


def _items(answer: Any, model: type[M], template: str, reasons: list[str]) -> list[M]:
    """The valid items of a model's answer, which should be a list of objects."""
    if isinstance(answer, dict) and len(answer) == 1:  # {"relationships": [...]}
        answer = next(iter(answer.values()))
    if not isinstance(answer, list):
        reasons.append(f"{template}: the answer is not a list: {answer!r:.200}")
        return []
    items = []
    for n, item in enumerate(answer):
        try:
            items.append(model.model_validate(item))
        except ValidationError as error:
            problem = error.errors()[0]
            where = ".".join(map(str, problem["loc"])) or "item"
            reasons.append(f"{template} item {n}: {problem['msg']} at {where}: {item!r:.120}")
    return items
