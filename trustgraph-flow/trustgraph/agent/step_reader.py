"""Reading a ReAct step (``step_schema.py``'s JSON) as the LLM writes it, delta by
delta, so the thought and the answer stream as their strings grow.

The JSON so far is parsed whole after each delta by pydantic-core's incremental
reader (``from_json(..., allow_partial="trailing-strings")``: an unfinished string
is read as far as it goes, an unfinished escape left out until it is whole), and
what the thought's or the answer's string gained since the last delta is passed on.
Leading white space is dropped and trailing white space held until text follows it,
so each reads as the model meant it. The thought has ended once ``next`` begins;
the step is known (tool and arguments, or the answer) at the end, when
text-completion has checked the whole of it against the schema.
"""
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import from_json

from trustgraph.model.text_completion.structured import json_in

Event = tuple[str, str]  # ("thought" | "answer", text) or ("thought_end", "")


@dataclass
class Step:
    thought: str = ""
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    answer: str | None = None  # set once the final answer has begun


class Growing:
    """A string read again as it grows: what it gained since the last reading."""

    __slots__ = ("taken", "started")

    def __init__(self) -> None:
        self.taken = 0  # characters of it passed on, or dropped as leading space
        self.started = False

    def gained(self, value: str) -> str:
        new = value[self.taken:]
        if not self.started:
            stripped = new.lstrip()
            self.taken += len(new) - len(stripped)
            new = stripped
        body = new.rstrip()  # trailing space waits for the text after it
        if body:
            self.taken += len(body)
            self.started = True
        return body


class StepReader:
    """``feed(delta)`` returns the events the delta makes; ``finish()`` those left at
    the end, when ``step`` is complete."""

    def __init__(self) -> None:
        self.step = Step()
        self._text = ""  # the JSON so far
        self._thought = Growing()
        self._answer = Growing()
        self._thought_ended = False

    def feed(self, delta: str) -> list[Event]:
        self._text += delta
        try:
            value = from_json(self._text, allow_partial="trailing-strings")
        except ValueError:  # not JSON: text-completion's check says so at the end
            return []
        return self._read(value)

    def finish(self) -> list[Event]:
        """The events left, and the step: the JSON is whole now (text-completion
        checked it), or as far as it went."""
        try:
            value = from_json(self._text, allow_partial="trailing-strings")
        except ValueError:
            try:  # a server that let the model wrap it in prose (text-completion took it)
                value = from_json(json_in(self._text))
            except ValueError:
                value = {}
        events = self._read(value, ended=True)
        step = value if isinstance(value, dict) else {}
        chosen = step.get("next")
        chosen = chosen if isinstance(chosen, dict) else {}
        self.step.thought = str(step.get("thought") or "").strip()
        if isinstance(chosen.get("final_answer"), str):
            self.step.answer = chosen["final_answer"].strip()
        self.step.tool = str(chosen.get("tool") or "")
        arguments = chosen.get("arguments")
        self.step.arguments = arguments if isinstance(arguments, dict) else {}
        return events

    def _read(self, value: Any, ended: bool = False) -> list[Event]:
        if not isinstance(value, dict):
            return []
        events: list[Event] = []
        thought = value.get("thought")
        if isinstance(thought, str) and not self._thought_ended:
            if text := self._thought.gained(thought):
                events.append(("thought", text))
        chosen = value.get("next")
        if not self._thought_ended and (chosen is not None or ended):
            self._thought_ended = True
            if self._thought.started:
                events.append(("thought_end", ""))
        answer = chosen.get("final_answer") if isinstance(chosen, dict) else None
        if isinstance(answer, str):
            if self.step.answer is None:
                self.step.answer = ""
            if text := self._answer.gained(answer):
                self.step.answer += text
                events.append(("answer", text))
        return events
