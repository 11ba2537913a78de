"""A service's answer rendered as one OpenAI chat completion: streamed as OpenAI's
``chat.completion.chunk`` events exactly, or collected into one ``chat.completion``.

Streamed: the first chunk's delta is ``{"role": "assistant", "content": ""}``, and
it carries what is known before the first token as extra fields (a RAG answer's
``sources``); then ``delta.content`` (the answer) and, for the agent,
``delta.reasoning_content`` (its thoughts, actions and observations, the field
several front-ends render) with ``delta.agent_step`` on actions and observations;
then a chunk with ``finish_reason``, the usage chunk when the client asked for it
(``stream_options.include_usage``: ``choices: []``, real token counts), and
``data: [DONE]``. A failure after the first chunk is the stream's last event,
``data: {"error": {...}}``, with no ``[DONE]``: the ``openai`` SDK raises it.

The answer is read as events (``trustgraph.answers``, by ``asking.rendered``); this
module only renders them. The token path costs one decode per record (``from_json``),
one small event and one encode of the delta's text: the rest of a content event is
bytes made once per answer.
"""
import json
import time
from typing import Any

from trustgraph.answers import Done, Event, Opened, Sources, Step, Text
from trustgraph.schema import Response, Usage

from .collected import Collected

DONE = b"data: [DONE]\n\n"


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


class Events:
    """The SSE events of one completion; what every event repeats is made once."""

    def __init__(self, completion_id: str, model: str, include_usage: bool) -> None:
        self.head = {"id": completion_id, "object": "chat.completion.chunk",
                     "created": int(time.time()), "model": model}
        self.include_usage = include_usage
        # With include_usage, OpenAI gives every other chunk "usage": null.
        self._tail = {"usage": None} if include_usage else {}
        self._open = b"data: " + dumps(self.head)[:-1] + b',"choices":[{"index":0,"delta":{"'
        usage = b',"usage":null' if include_usage else b""
        self._close = b'},"logprobs":null,"finish_reason":null}]' + usage + b"}\n\n"

    def text(self, field: bytes, text: str) -> bytes:
        """A delta of one text field (``content``, ``reasoning_content``): the hot path."""
        return b"".join((self._open, field, b'":', dumps(text), self._close))

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None,
              **extra: Any) -> bytes:
        """Any other chunk: the first, an agent's step, the last; ``extra``: fields
        beyond OpenAI's, which standard clients ignore."""
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return b"data: " + dumps({**self.head, "choices": [choice], **self._tail, **extra}
                                 ) + b"\n\n"

    def usage(self, usage: dict[str, int]) -> bytes:
        return b"data: " + dumps({**self.head, "choices": [], "usage": usage}) + b"\n\n"


def openai_usage(usage: Usage) -> dict[str, int]:
    prompt, completion = usage.in_token or 0, usage.out_token or 0
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


class Completion:
    """One completion, rendered as its events come (``render``: a batch of events as
    its chunks) and kept for the collected ``chat.completion`` (``collected``).

    What the service's response model declares decides the extras: sources it opens
    with go on the first chunk (RAG), sources found later on a chunk of their own
    (the agent's), its short result fields on the last chunk (LazyRAG's confidence),
    and a service that takes steps has them as ``agent_steps``. The answer's text is
    ``content``; the steps are ``reasoning_content`` (an action as ``Action: tool
    {arguments}``, an observation as ``Observation: ...``), actions and observations
    also as ``delta.agent_step`` (``{"chunk_type", "delta", "tool"?, "arguments"?}``,
    as the answer-stream API's step lines)."""

    def __init__(self, events: Events, model: type[Response], usage: Usage,
                 citations: bool = False, extra: dict[str, Any] | None = None,
                 streaming: bool = True) -> None:
        self.events = events
        self.usage = usage  # what was spent before the service was asked (a rewrite)
        self.citations = citations
        self.sources_first = "sources" in model.opening
        self.brief = model.brief_fields
        self.takes_steps = bool(model.step_kinds)
        # What the collected completion needs (the text, the steps): kept only when it
        # is wanted, not per delta of a stream.
        self.whole = None if streaming else Collected()
        self.reasoning: list[str] = []
        self.cited = ""
        # Beyond OpenAI's fields: on the first chunk (streamed) or the completion ...
        self.extra: dict[str, Any] = dict(extra or {})
        self.final_extra: dict[str, Any] = {}  # ... and on the last chunk
        self._ended = True  # the last message ended: the next reasoning starts anew

    def render(self, events: list[Event]) -> bytes:
        if self.whole is not None:
            self.whole.add(events)
        chunks: list[bytes] = []
        for event in events:
            if type(event) is Text:
                if event.delta:
                    chunks.append(self.events.text(b"content", event.delta))
                self._ended = event.ends
            elif type(event) is Step:
                if step := self._step(event):
                    chunks.append(step)
                self._ended = event.ends
            elif type(event) is Opened:
                chunks += self._opened(event)
            elif type(event) is Sources:
                self.extra["sources"] = event.sources
                chunks.append(self.events.chunk({}, sources=event.sources))
            elif type(event) is Done:
                chunks += self._ending(event)
        return b"".join(chunks)

    def collected(self) -> dict[str, Any]:
        """The completion as one ``chat.completion`` object (``streaming`` false)."""
        whole = self.whole or Collected()
        message: dict[str, Any] = {"role": "assistant", "content": whole.text + self.cited}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
        completion = {**self.events.head, "object": "chat.completion", "choices": [choice],
                      "usage": openai_usage(self.usage), **self.extra, **self.final_extra}
        if self.takes_steps:
            completion["agent_steps"] = [{"chunk_type": step.kind, "content": step.delta,
                                          **_action(step)}
                                         for step in whole.steps if step.kind != "thought"]
        return completion

    def _opened(self, opened: Opened) -> list[bytes]:
        """The first chunk: the role, and what is known before the first token."""
        if opened.session_id:
            self.extra["session_id"] = opened.session_id
        if self.sources_first:
            self.extra["sources"] = opened.sources or []
        chunks = [self.events.chunk({"role": "assistant", "content": ""}, **self.extra)]
        if not self.sources_first and opened.sources:
            self.extra["sources"] = opened.sources
            chunks.append(self.events.chunk({}, sources=opened.sources))
        return chunks

    def _step(self, step: Step) -> bytes | None:
        if step.kind == "thought":
            return self.events.text(b"reasoning_content", self._reason(step.delta)) \
                if step.delta else None
        action = _action(step)
        if action:
            shown = f"Action: {action['tool']} {json.dumps(action['arguments'] or {})}"
        elif step.delta:
            shown = f"Observation: {step.delta}" if self._ended else step.delta
        else:
            return None
        return self.events.chunk({"reasoning_content": self._reason(shown), "agent_step": {
            "chunk_type": step.kind, "delta": step.delta, **action}})

    def _reason(self, text: str) -> str:
        if self._ended and self.reasoning:
            text = "\n\n" + text
        self.reasoning.append(text)
        return text

    def _ending(self, done: Done) -> list[bytes]:
        self.usage.add(done.usage)
        self.final_extra = {key: done.result[key] for key in self.brief
                            if done.result.get(key) is not None}
        if done.session_id:
            self.extra["session_id"] = done.session_id
        chunks = []
        self.cited = citations(self.extra.get("sources") or []) if self.citations else ""
        if self.cited:
            chunks.append(self.events.text(b"content", self.cited))
        chunks.append(self.events.chunk({}, "stop", **self.final_extra))
        if self.events.include_usage:
            chunks.append(self.events.usage(openai_usage(self.usage)))
        return [*chunks, DONE]


def _action(step: Step) -> dict[str, Any]:
    """An action's tool (named by its text, when the frame named none) and arguments."""
    return {"tool": step.tool or step.delta, "arguments": step.arguments} \
        if step.kind == "action" else {}


def citations(sources: list[dict[str, Any]]) -> str:
    """Numbered references to the documents the sources come from, for clients that
    show only the answer's text; empty when no source names a document."""
    documents: dict[str, str] = {}
    for source in sources:
        document = source.get("document_id") or ""
        if document and document not in documents:
            title = source.get("title") or ""
            documents[document] = f"{title} ({document})" if title else document
    if not documents:
        return ""
    lines = (f"[{n}] {name}" for n, name in enumerate(documents.values(), 1))
    return "\n\nSources:\n" + "\n".join(lines)
