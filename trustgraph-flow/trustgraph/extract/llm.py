"""LLM extraction through the prompt service: ``extract-definitions`` gives entities
with definitions, ``extract-relationships`` gives (subject, predicate, object) facts.

The model's answers are checked item by item: an item that is not what the template
asks for is logged and skipped, and so is a whole answer the prompt service could
not use (``prompt-error``) or a model that failed after the text-completion
service's own retries (``llm-error``). A chunk thus yields whatever did succeed.
Failures of the bus itself (a timeout, responses lost) are raised, so the stage
redelivers the chunk rather than leaving a hole in the graph.
"""
import asyncio
import logging
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from trustgraph.base import PromptClient, ServiceError
from trustgraph.schema import Chunk, Term

from .graph import ChunkGraph, tidy
from .vocabulary import LABEL, relation_iri

log = logging.getLogger(__name__)

DEFINITIONS = "extract-definitions"
RELATIONSHIPS = "extract-relationships"
SKIPPED_ERRORS = {"prompt-error", "llm-error"}

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
    outcomes = await asyncio.gather(
        _ask(prompts, DEFINITIONS, chunk), _ask(prompts, RELATIONSHIPS, chunk),
        return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    definitions, relationships = outcomes
    graph = ChunkGraph(chunk)
    for item in _items(definitions, Definition, DEFINITIONS, chunk):
        graph.entity(item.entity, item.definition)
    for relationship in _items(relationships, Relationship, RELATIONSHIPS, chunk):
        add_relationship(graph, relationship)
    return graph


def add_relationship(graph: ChunkGraph, item: Relationship) -> None:
    predicate = relation_iri(item.predicate)
    subject = graph.entity(item.subject)
    if predicate is None or subject is None:
        log.warning("%s: relationship without a usable subject or predicate skipped: %r",
                    graph.chunk.id, item)
        return
    thing = graph.entity(item.object) if item.object_entity else None
    graph.add(subject, predicate, thing or Term.literal(tidy(item.object)))
    graph.add(Term.iri(predicate), LABEL, Term.literal(tidy(item.predicate)))


async def _ask(prompts: PromptClient, template: str, chunk: Chunk) -> Any:
    try:
        return await prompts.prompt(template, {"text": chunk.text})
    except ServiceError as error:
        if error.error.type not in SKIPPED_ERRORS:
            raise
        log.warning("%s: %s skipped: %s", chunk.id, template, error)
        return []


def _items(answer: Any, model: type[M], template: str, chunk: Chunk) -> list[M]:
    """The valid items of a model's answer, which should be a list of objects."""
    if isinstance(answer, dict) and len(answer) == 1:  # {"relationships": [...]}
        answer = next(iter(answer.values()))
    if not isinstance(answer, list):
        log.warning("%s: %s answer is not a list, skipped: %.200r", chunk.id, template,
                    answer)
        return []
    items = []
    for n, item in enumerate(answer):
        try:
            items.append(model.model_validate(item))
        except ValidationError as error:
            problem = error.errors()[0]
            log.warning("%s: %s item %d skipped (%s at %s): %.200r", chunk.id, template, n,
                        problem["msg"], ".".join(map(str, problem["loc"])) or "item", item)
    return items
