"""A service's records read as one OpenAI chat completion: streamed as OpenAI's
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

The token path costs one decode per record (``from_json``) and one encode of the
delta's text: the rest of a content event is bytes made once per answer.
"""
import json
import time
from collections.abc import AsyncGenerator, AsyncIterable
from typing import Any

from pydantic_core import from_json

from trustgraph.base import ServiceError
from trustgraph.schema import Error, Usage

from ..core import Frame, raise_error

DONE = b"data: [DONE]\n\n"
TOKEN_FIELDS = frozenset(("in_token", "out_token", "model"))


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
    """One completion as a service's records arrive: ``translate`` turns batches of
    records into batches of events (one frame per batch); what was read is kept for
    the collected answer (``collected``). The records of a RAG service (``chunk``
    deltas after a ``metadata`` record with the sources) or of text-completion
    (``response`` deltas); ``sources``: whether the answer has any (RAG)."""

    def __init__(self, events: Events, usage: Usage, sources: bool = True,
                 citations: bool = False, extra: dict[str, Any] | None = None) -> None:
        self.events = events
        self.usage = usage  # what was spent before the service was asked (a rewrite)
        self.citations = citations
        self.opened = False
        self.content: list[str] = []
        self.reasoning: list[str] = []
        # Beyond OpenAI's fields: on the first chunk (streamed) or the completion.
        self.extra: dict[str, Any] = dict(extra or {})
        if sources:
            self.extra["sources"] = []
        self.final_extra: dict[str, Any] = {}  # on the last chunk (LazyRAG's confidence)

    async def translate(self, frames: AsyncIterable[list[Frame]]
                        ) -> AsyncGenerator[list[Frame], None]:
        async for batch in frames:
            events: list[bytes] = []
            try:
                for data, final in batch:
                    events += self.read(from_json(data), final)
            except ServiceError:
                if events:  # what came before the error, then the error
                    yield [(b"".join(events), False)]
                raise
            if events:
                yield [(b"".join(events), batch[-1][1])]

    def read(self, record: dict[str, Any], final: bool) -> list[bytes]:
        if record.get("message_type") == "progress":
            return []
        events = self._opening(record)
        # A RAG delta is ``chunk``; text-completion's (or one whole answer) ``response``.
        delta = record.get("chunk") if record.get("message_type") else record.get("response")
        if delta:
            events.append(self._content(delta))
        if final:
            if record.get("summary_error"):  # LazyRAG: the subgraph, but no answer
                raise ServiceError(Error.model_validate(record["summary_error"]))
            self.final_extra = {key: record[key] for key in ("confidence", "missing_info")
                                if record.get(key) is not None}
            events += self._ending()
        return events

    def collected(self) -> dict[str, Any]:
        """The completion as one ``chat.completion`` object."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content)}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
        return {**self.events.head, "object": "chat.completion", "choices": [choice],
                "usage": openai_usage(self.usage), **self.extra, **self.final_extra}

    def _opening(self, record: dict[str, Any]) -> list[bytes]:
        """Any record: raise its error, count its tokens; the first one opens the
        answer with its role and what is known before the first token."""
        raise_error(record)
        if not TOKEN_FIELDS.isdisjoint(record):  # most deltas carry no counts
            self.usage.add(Usage.of(record))
        if self.opened:
            return []
        self.opened = True
        if "sources" in self.extra:
            self.extra["sources"] = record.get("sources") or []
        return [self.events.chunk({"role": "assistant", "content": ""}, **self.extra)]

    def _content(self, text: str) -> bytes:
        self.content.append(text)
        return self.events.text(b"content", text)

    def _ending(self) -> list[bytes]:
        events = []
        cited = citations(self.extra.get("sources") or []) if self.citations else ""
        if cited:
            events.append(self._content(cited))
        events.append(self.events.chunk({}, "stop", **self.final_extra))
        if self.events.include_usage:
            events.append(self.events.usage(openai_usage(self.usage)))
        return events + [DONE]


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


class AgentCompletion(Completion):
    """The agent's dialog: its answer as ``content``; its thoughts, actions and
    observations as ``reasoning_content`` (an action as ``Action: tool {arguments}``,
    an observation as ``Observation: ...``), actions and observations also as
    ``delta.agent_step`` (``{"chunk_type", "delta", "tool"?, "arguments"?}``, as the
    answer-stream API's step lines). The session goes on the first chunk
    (``session_id``), its sources (pattern ``ask``) on a chunk of their own before
    the answer's first token."""

    def __init__(self, events: Events, usage: Usage, sources: bool = True,
                 citations: bool = False, extra: dict[str, Any] | None = None) -> None:
        super().__init__(events, usage, sources=False, citations=citations, extra=extra)
        self.steps: list[dict[str, Any]] = []
        self._message_ended = True  # the next reasoning starts a message of its own

    def read(self, record: dict[str, Any], final: bool) -> list[bytes]:
        if record.get("session_id") and not self.opened:
            self.extra["session_id"] = record["session_id"]
        events = self._opening(record)
        kind: str = record.get("chunk_type") or ""
        content: str = record.get("content") or ""
        if kind == "error":  # an error frame without ``error``: still the dialog's end
            raise ServiceError(Error(type="agent-error", message=content or "agent failed"))
        if record.get("sources") and "sources" not in self.extra:
            self.extra["sources"] = record["sources"]
            events.append(self.events.chunk({}, sources=record["sources"]))
        if kind == "answer" and content:
            events.append(self._content(content))
        elif kind == "thought" and content:
            events.append(self.events.text(b"reasoning_content", self._reason(content)))
        elif kind in ("action", "observation") and (content or kind == "action"):
            events.append(self._step(kind, content, record))
        if kind:
            self._message_ended = bool(record.get("end_of_message"))
        if final:
            self.extra["session_id"] = record.get("session_id") or self.extra.get("session_id")
            events += self._ending()
        return events

    def collected(self) -> dict[str, Any]:
        return {**super().collected(), "agent_steps": self.steps}

    def _reason(self, text: str) -> str:
        if self._message_ended and self.reasoning:
            text = "\n\n" + text
        self.reasoning.append(text)
        return text

    def _step(self, kind: str, content: str, record: dict[str, Any]) -> bytes:
        action = {"tool": record.get("tool") or content,
                  "arguments": record.get("arguments")} if kind == "action" else {}
        if action:
            shown = f"Action: {action['tool']} {json.dumps(action['arguments'] or {})}"
        else:
            shown = f"Observation: {content}" if self._message_ended else content
        if self.steps and not self._message_ended and self.steps[-1]["chunk_type"] == kind:
            self.steps[-1]["content"] += content
        else:
            self.steps.append({"chunk_type": kind, "content": content, **action})
        step = {"chunk_type": kind, "delta": content, **action}
        return self.events.chunk({"reasoning_content": self._reason(shown), "agent_step": step})
