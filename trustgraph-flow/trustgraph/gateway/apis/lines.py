"""The answer-stream API's NDJSON lines and collected answers (``/api/v1/query``,
``/api/v1/lazy-rag/query``), declared once as models: the OpenAPI document shows
them, and ``Lines`` writes every line from them (the per-delta lines from templates
the models make once), so what is sent and what is documented cannot differ.

A service with a result of its own (its response model's ``result_fields``: LazyRAG's
subgraph) gets ``done`` lines and collected answers with those fields added, made
from its response model (``with_result``).
"""
import json
from dataclasses import asdict
from functools import cache
from typing import Any, Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, JsonValue, create_model

from trustgraph.answers import Done, Event, Opened, Progress, Step, Text
from trustgraph.schema import Response, Source

from .collected import Collected


class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid")


M = TypeVar("M", bound=BaseModel)


class UsageLine(_Line):
    in_token: int | None
    out_token: int | None
    model: str | None


class MetadataLine(_Line):
    type: Literal["metadata"]
    sources: list[Source]
    optimized_query: str | None
    subqueries: list[str]
    request_id: str


class ProgressLine(_Line):
    type: Literal["progress"]
    message: str


class ContentLine(_Line):
    type: Literal["content"]
    delta: str


StepKind = Literal["thought", "action", "observation"]


class StepLine(_Line):
    """Mode agent: a piece of a thought or observation, or an action (with its tool
    and arguments), before and between the answer's content lines."""

    type: Literal["step"]
    chunk_type: StepKind
    delta: str
    tool: str | None = None
    arguments: dict[str, JsonValue] | None = None


class DoneLine(_Line):
    type: Literal["done"]
    usage: UsageLine
    session_id: str | None = None  # mode agent: the conversation, to continue it


class ErrorLine(_Line):
    type: Literal["error"]
    message: str
    error_type: str


class CollectedAnswer(_Line):
    response: str
    sources: list[Source]
    optimized_query: str | None
    subqueries: list[str]
    request_id: str
    usage: UsageLine


class AgentStep(_Line):
    chunk_type: StepKind
    content: str
    tool: str | None = None
    arguments: dict[str, JsonValue] | None = None


class CollectedAgentAnswer(_Line):
    """Mode agent, ``stream: false``: the answer, and the steps that led to it."""

    response: str
    steps: list[AgentStep]
    sources: list[Source]
    request_id: str
    session_id: str | None
    usage: UsageLine


@cache
def with_result(line: type[M], model: type[Response], name: str | None = None) -> type[M]:
    """``line`` with the result fields of ``model`` (each always there, null when the
    service left it unset), as ``name`` (default: ``LazyRagDoneLine`` for ``DoneLine``
    and ``LazyRagResponse``); ``line`` itself for a model with no result. Made once per
    line and model, so every API shows the same model."""
    if not model.result_fields:
        return line
    fields: dict[str, Any] = {field: (model.model_fields[field].annotation, ...)
                              for field in model.result_fields}
    name = name or model.__name__.removesuffix("Response") + line.__name__
    return cast(type[M], create_model(name, __base__=line, **fields))


def done_model(model: type[Response]) -> type[_Line]:
    """The ``done`` line of an answer of ``model``."""
    return with_result(DoneLine, model)


def collected_model(model: type[Response]) -> type[_Line]:
    """What ``stream: false`` answers for a service answering with ``model``: with
    its steps when it takes steps (the agent), and its result when it has one."""
    return with_result(CollectedAgentAnswer if model.step_kinds else CollectedAnswer, model)


class Template:
    """The bytes of a ``model`` line whose one string field varies, made once from the
    model: per line, only that field's value is encoded."""

    def __init__(self, model: type[_Line], field: str, **fixed: Any) -> None:
        shown = model.model_validate({**fixed, field: "\0"}).model_dump_json(exclude_unset=True)
        self.head, self.tail = (part.encode() for part in shown.split('"\\u0000"'))

    def line(self, value: str) -> bytes:
        return self.head + dumps(value) + self.tail


CONTENT = Template(ContentLine, "delta", type="content")
STEPS = {kind: Template(StepLine, "delta", type="step", chunk_type=kind)
         for kind in ("thought", "action", "observation")}


class Lines:
    """An answer's events as its NDJSON lines (``render``: one batch, the lines joined
    by newlines): ``progress`` (opt-in), ``metadata`` when it opens, ``content``
    (its text) and ``step`` (the agent's steps), then ``done``."""

    def __init__(self, request_id: str, model: type[Response]) -> None:
        self.request_id = request_id
        self.done = done_model(model)

    def render(self, events: list[Event]) -> bytes:
        lines = []
        for event in events:
            if type(event) is Text:
                if event.delta:
                    lines.append(CONTENT.line(event.delta))
            elif type(event) is Step:
                if event.delta or event.tool is not None:
                    lines.append(self._step(event))
            elif type(event) is Opened:
                lines.append(_shown(MetadataLine, {
                    "type": "metadata", "sources": event.sources or [],
                    "optimized_query": event.optimized_query,
                    "subqueries": event.subqueries, "request_id": self.request_id}))
            elif type(event) is Progress:
                lines.append(_shown(ProgressLine, {"type": "progress",
                                                   "message": event.message}))
            elif type(event) is Done:
                lines.append(_shown(self.done, self._done(event)))
        return b"\n".join(lines)

    def _step(self, step: Step) -> bytes:
        if step.tool is None and step.arguments is None:
            return STEPS[step.kind].line(step.delta)
        return _shown(StepLine, {"type": "step", "chunk_type": step.kind, "delta": step.delta,
                                 **_action(step)})

    @staticmethod
    def _done(done: Done) -> dict[str, Any]:
        line = {"type": "done", "usage": asdict(done.usage), **done.result}
        if done.session_id is not None:
            line["session_id"] = done.session_id
        return line


def collected_answer(whole: Collected, model: type[Response], request_id: str
                     ) -> dict[str, Any]:
    """``stream: false``: the whole answer, as ``collected_model(model)`` has it."""
    shape = collected_model(model)
    given = {"response": whole.text, "sources": whole.sources or [],
             "optimized_query": whole.opened.optimized_query,
             "subqueries": whole.opened.subqueries, "request_id": request_id,
             "session_id": whole.session_id, "usage": asdict(whole.usage),
             "steps": [{"chunk_type": step.kind, "content": step.delta, **_action(step)}
                       for step in whole.steps], **whole.result}
    return _valid(shape, {key: value for key, value in given.items()
                          if key in shape.model_fields})


def error_line(message: str, error_type: str) -> bytes:
    return _shown(ErrorLine, {"type": "error", "message": message, "error_type": error_type})


def _action(step: Step) -> dict[str, Any]:
    return {key: value for key, value in (("tool", step.tool), ("arguments", step.arguments))
            if value is not None}


def _valid(model: type[_Line], line: dict[str, Any]) -> dict[str, Any]:
    """``line`` as ``model`` writes it (checked against it: a line that is not what
    the document says fails here, not at a client)."""
    return model.model_validate(line).model_dump(mode="json", exclude_unset=True)


def _shown(model: type[_Line], line: dict[str, Any]) -> bytes:
    return model.model_validate(line).model_dump_json(exclude_unset=True).encode()


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
