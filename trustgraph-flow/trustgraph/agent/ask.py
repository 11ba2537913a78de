"""The ``ask`` pattern: the two phases of seed 004, with the routing and the final
prompt written once.

Phase 1 generates nothing the user sees: the question is classified
(``agent-classify``: knowledge | code | conversational) and, when the session has
earlier turns, rewritten to stand alone (``agent-reformulate``), both at once; for
the knowledge route the evidence is retrieved in the user's collection with the
retrieval functions of DocumentRAG or GraphRAG themselves. One thought frame then
says the route and the question, carrying the sources. Phase 2 streams the answer
of the route's template (``agent-<route>``), built by ``final_prompt``.
"""
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from trustgraph.base import Delta, HandledError, Relay
from trustgraph.base.steps import concurrently, step
from trustgraph.retrieval.answer import Found
from trustgraph.retrieval.document_rag.service import retrieve_chunks
from trustgraph.retrieval.graph_rag.service import retrieve_triples
from trustgraph.schema import AgentResponse, DocumentRagRequest, GraphRagRequest, Source
from trustgraph.schema.agent import Route

from . import frames
from .dialog import Dialog, Frames, Pattern
from .sessions import Turn

ERROR = "agent-error"
CLASSIFY = "agent-classify"
REFORMULATE = "agent-reformulate"
ROUTES: tuple[str, ...] = get_args(Route)  # knowledge, code, conversational
Retrieval = Literal["document", "graph"]


@dataclass
class AskLimits:
    retrieval: Retrieval  # where the knowledge route looks
    doc_limit: int  # chunks (document) or seed entities (graph) retrieved


@dataclass
class Prepared:
    """What phase 1 found."""

    route: str
    question: str  # as it stands alone: the reformulation, or the question as asked
    sources: list[Source] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)  # template variables


def ask(limits: AskLimits) -> Pattern:
    async def pattern(dialog: Dialog) -> Frames:
        prepared = await prepare(dialog, limits)
        yield frames.route_thought(prepared.route, prepared.question, prepared.sources)
        template, variables = final_prompt(prepared, dialog.turns)
        with step(ERROR, f"answering ({template})"):
            yield Relay(answer_frames(dialog, template, variables))  # its frames, in its place
    return pattern


async def answer_frames(dialog: Dialog, template: str, variables: dict[str, Any]
                        ) -> AsyncIterator[Delta | AgentResponse]:
    """Template ``template``'s text streamed as answer frames, then the dialog's end.
    Closing this closes the prompt request and its LLM stream."""
    answer: list[str] = []
    async with aclosing(dialog.prompts.stream(template, variables, dialog.counted)) as pieces:
        async for piece in pieces:
            if isinstance(piece, Delta):
                answer.append(piece.text)
                yield Delta(piece.text, "answer")
    yield await dialog.end("".join(answer))


async def prepare(dialog: Dialog, limits: AskLimits) -> Prepared:
    # At once; a failure of either cancels the other.
    route, question = await concurrently(_classify(dialog), _reformulate(dialog))
    prepared = Prepared(route, question)
    if route == "knowledge":
        found = await _retrieve(dialog, question, limits)
        prepared.sources = found.sources
        prepared.evidence = {name: value for name, value in found.variables.items()
                             if name != "query"}
    return prepared


def final_prompt(prepared: Prepared, turns: list[Turn]) -> tuple[str, dict[str, Any]]:
    """The one place the answer's prompt is chosen and filled, for every route."""
    return f"agent-{prepared.route}", {
        "question": prepared.question, "history": history(turns), **prepared.evidence}


def parse_route(value: Any) -> str:
    """The route an ``agent-classify`` answer names: ``{"route": "knowledge"}`` (the
    shipped template's schema holds the model to one of the routes), or from a
    template edited without it the bare word; any case, quotes or spaces around it."""
    if isinstance(value, dict):
        value = value.get("route")
    route = value.strip().strip("\"'.").lower() if isinstance(value, str) else None
    if route not in ROUTES:
        raise HandledError(ERROR, f"the {CLASSIFY} prompt answered {value!r}, not one of "
                                  f"{', '.join(ROUTES)}: check the template")
    return route


def history(turns: list[Turn]) -> list[dict[str, str]]:
    return [{"question": turn.question, "answer": turn.answer} for turn in turns]


async def _classify(dialog: Dialog) -> str:
    with step(ERROR, f"classifying the question ({CLASSIFY})"):
        result = await dialog.prompts.invoke(CLASSIFY, {
            "question": dialog.request.question, "history": history(dialog.turns)})
    dialog.usage.add(result.usage)
    return parse_route(result.object)


async def _reformulate(dialog: Dialog) -> str:
    if not dialog.turns:  # nothing earlier for the question to lean on
        return dialog.request.question
    with step(ERROR, f"reformulating the question ({REFORMULATE})"):
        result = await dialog.prompts.invoke(REFORMULATE, {
            "question": dialog.request.question, "history": history(dialog.turns)})
    dialog.usage.add(result.usage)
    # An empty rewrite answers the question as asked rather than nothing.
    return (result.text or "").strip() or dialog.request.question


async def _retrieve(dialog: Dialog, question: str, limits: AskLimits) -> Found:
    request = dialog.request
    scope = {"query": question, "user": request.user, "collection": request.collection}
    if limits.retrieval == "graph":
        return await retrieve_triples(GraphRagRequest(**scope, entity_limit=limits.doc_limit),
                                      [question], dialog.clients)
    return await retrieve_chunks(DocumentRagRequest(**scope, doc_limit=limits.doc_limit),
                                 [question], dialog.clients)
