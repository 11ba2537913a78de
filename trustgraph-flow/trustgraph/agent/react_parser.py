"""Reading a ReAct step as the LLM writes it, delta by delta.

The ``agent-react`` template asks for one of::

    Thought: <reasoning>                 Thought: <reasoning>
    Action: <tool name>                  Final Answer: <the answer>
    Args: <JSON object>                  (``Action Input:`` is read as ``Args:``)

A marker counts only at the start of a line (Markdown emphasis or a heading mark
around it allowed), so a thought that mentions "Action:" mid-sentence stays a
thought. Text is passed on the moment it cannot be part of a marker: mid-line text
at once, and the start of a line as soon as it stops looking like the beginning of
one ("Act" is held, "Actually" is sent). Whitespace at the end
of what has been read is held too, so a thought never ends in the newline before
"Action:". Everything after "Final Answer:" is answer text, markers or not.
"""
import json
import re
from dataclasses import dataclass

# Marker (lower case, as written at the start of a line) -> the section it opens.
MARKERS = {
    "thought:": "thought",
    "action:": "action",
    "action input:": "args",
    "args:": "args",
    "final answer:": "answer",
    "observation:": "observation",
}
LONGEST_MARKER = max(map(len, MARKERS))
# Markdown some models put around a marker ("**Thought:**", "### Action:").
MARKUP = " \t*#"
# What a section may be followed by; any other marker ends the step (the model went
# on writing what the agent supplies, e.g. its own "Observation:").
FOLLOWS = {"thought": {"thought", "action", "args", "answer"}, "action": {"args"}}
STREAMED = ("thought", "answer")

Event = tuple[str, str]  # ("thought" | "answer", text) or ("thought_end", "")


@dataclass
class Step:
    thought: str = ""
    action: str = ""
    arguments_text: str = ""
    answer: str | None = None  # set once "Final Answer:" has been read


class ReactParser:
    """``feed(delta)`` returns what can be sent now; ``finish()`` what was held.
    ``stopped`` turns true when the step is complete and the rest of the stream is
    not needed."""

    def __init__(self) -> None:
        self.step = Step()
        self.stopped = False
        self._section = "thought"  # text before any marker is read as the thought
        self._line: str | None = ""  # the start of a line that may still be a marker
        self._held_space = ""  # whitespace sent only if more text follows it
        self._started = False  # the section has had text (leading space is dropped)

    def feed(self, delta: str) -> list[Event]:
        events: list[Event] = []
        while delta and not self.stopped:
            if self._section == "answer":
                self._add(delta, events)
                break
            if self._line is None:
                delta = self._mid_line(delta, events)
            else:
                delta = self._line_start(delta, events)
        return events

    def finish(self) -> list[Event]:
        events: list[Event] = []
        if self._line and not self.stopped:
            self._add(self._line, events)  # a line that ended while looking like a marker
        self._line = None
        self._close(events)
        # "Action: name" then the JSON on the next line, without "Args:": read as args.
        name, _, rest = self.step.action.strip().partition("\n")
        self.step.action = name.strip().strip("`*\"'").strip()
        if rest.strip() and not self.step.arguments_text.strip():
            self.step.arguments_text = rest
        return events

    def _mid_line(self, delta: str, events: list[Event]) -> str:
        end = delta.find("\n")
        if end < 0:
            self._add(delta, events)
            return ""
        self._add(delta[:end + 1], events)
        self._line = ""
        return delta[end + 1:]

    def _line_start(self, delta: str, events: list[Event]) -> str:
        end = delta.find("\n")
        piece = delta if end < 0 else delta[:end]
        line = (self._line or "") + piece
        stripped = line.lstrip(MARKUP)
        lower = stripped[:LONGEST_MARKER].lower()
        marker = next((m for m in MARKERS if lower.startswith(m)), None)
        if marker is not None:
            self._line = None
            self._open(MARKERS[marker], events)
            if not self.stopped:
                self._add(stripped[len(marker):].lstrip("*"), events)
            return delta[len(piece):]
        if end < 0 and any(m.startswith(lower) for m in MARKERS):
            self._line = line  # may still become a marker: wait for more
            return ""
        self._line = None
        self._add(line, events)
        return delta[len(piece):]

    def _open(self, section: str, events: list[Event]) -> None:
        if section == self._section and section == "thought":
            return  # "Thought:" at the start, or repeated: the same thought goes on
        if section not in FOLLOWS.get(self._section, ()):
            self.stopped = True
            return
        self._close(events)
        self._section, self._started, self._held_space = section, False, ""
        if section == "answer":
            self.step.answer = ""

    def _close(self, events: list[Event]) -> None:
        if self._section == "thought" and self._started:
            events.append(("thought_end", ""))
            self._started = False  # once

    def _add(self, text: str, events: list[Event]) -> None:
        section = self._section
        if section not in STREAMED:
            if section == "action":
                self.step.action += text
            else:
                self.step.arguments_text += text
            return
        if not self._started:
            text = text.lstrip()
            if not text:
                return
        body = text.rstrip()
        if not body:
            self._held_space += text
            return
        out = self._held_space + body
        self._held_space = text[len(body):]
        self._started = True
        if section == "thought":
            self.step.thought += out
        else:
            self.step.answer = (self.step.answer or "") + out
        events.append((section, out))


class BadArguments(ValueError):
    pass


FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


def parse_arguments(text: str) -> dict:
    """The JSON object of an ``Args:`` section (a Markdown fence allowed around it);
    nothing at all means no arguments."""
    text = FENCE.sub("", text.strip()).strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        start, end = text.find("{"), text.rfind("}")
        try:
            value = json.loads(text[start:end + 1]) if 0 <= start < end else None
        except json.JSONDecodeError:
            value = None
        if value is None:
            raise BadArguments(f"the arguments are not JSON: {text[:200]!r}") from None
    if not isinstance(value, dict):
        raise BadArguments(f"the arguments must be a JSON object, not {text[:200]!r}")
    return value
