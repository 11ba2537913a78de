"""What an answer says, in order, whichever service gave it: the events every API
renders (the answer-stream API's NDJSON lines, the OpenAI API's chunks, the MCP
tools' results, LazyRAG's envelope, the client library's events).

An answer is: ``Progress`` (opt-in, while retrieving), one ``Opened`` (with its first
record), then ``Text`` (the answer's pieces), ``Step`` (the agent's thoughts, actions
and observations) and ``Sources`` (evidence found on the way) in the order the
service sent them, and one ``Done``; or, instead of ``Done``, one ``Failed``.

A text is carried by a ``Text`` per delta, so these are plain slotted classes (no
validation, no copy): cheap on the token path.
"""
from dataclasses import dataclass, field
from typing import Any

from ..schema import Error, Usage

Source = dict[str, Any]  # a ``trustgraph.schema.Source`` as the wire carries it


@dataclass(slots=True)
class Progress:
    message: str  # what the service is doing ("searching the documents ...")


@dataclass(slots=True)
class Opened:
    """The answer's first record: what is known before its first token. ``sources``
    is None when the service said nothing of them (the agent's may come later, as
    ``Sources``)."""

    sources: list[Source] | None = None
    optimized_query: str | None = None  # the question as rewritten, when asked to
    subqueries: list[str] = field(default_factory=list)
    session_id: str | None = None  # the agent's conversation


@dataclass(slots=True)
class Text:
    delta: str  # a piece of the answer's text
    ends: bool = False  # it ends its message (the agent marks where its answer ends)


@dataclass(slots=True)
class Step:
    """A piece of a step towards the answer: a thought, an action (the tool it calls
    and with what) or an observation (what the tool said)."""

    kind: str  # "thought", "action" or "observation"
    delta: str
    ends: bool = False  # it ends its thought or observation
    tool: str | None = None  # an action's tool ...
    arguments: dict[str, Any] | None = None  # ... and its arguments


@dataclass(slots=True)
class Sources:
    sources: list[Source]  # evidence found after the answer opened (the agent's)


@dataclass(slots=True)
class Done:
    """The answer's end: the tokens it cost, the sources it rests on, and the
    service's own result (its response model's ``result_fields``, each present, None
    when the final record left it out). ``failure``: the text failed while the result
    stands (LazyRAG's ``summary_error``)."""

    usage: Usage
    sources: list[Source] | None = None
    session_id: str | None = None
    result: dict[str, Any] = field(default_factory=dict)
    failure: Error | None = None


@dataclass(slots=True)
class Failed:
    error: Error  # the service's error: nothing follows


Event = Progress | Opened | Text | Step | Sources | Done | Failed
