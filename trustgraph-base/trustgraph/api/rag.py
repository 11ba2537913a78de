"""RAG answers (graph-rag, document-rag, lazy-rag, the answer-stream API) as events.

Every answer is, in order: one ``Metadata`` event (the sources, known before the
first token; the rewritten question and sub-questions), ``Chunk`` events carrying
the answer's text deltas, and one ``Final`` event with the sources and the token
usage (and, for lazy-rag, the ``LazyResult``: the subgraph the answer was written
from, its confidence and what is missing). Both transports give the same events: the
websocket's RAG frames
(``events_from_frames``) and the answer-stream API's NDJSON lines
(``events_from_lines``). ``RagStream`` is what a caller iterates; ``Answer`` is the
collected answer.
"""
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field, fields
from typing import Any, Self

from .errors import TrustGraphError
from .streams import Completion, Usage

Source = dict[str, Any]  # {"id", "document_id", "title", "text", "distance"} (+ "s", "p", "o")


@dataclass(frozen=True)
class Metadata:
    sources: list[Source]
    optimized_query: str | None = None  # the question as rewritten, when asked to
    subqueries: list[str] = field(default_factory=list)
    request_id: str | None = None  # the answer-stream API's id for the request


@dataclass(frozen=True)
class Chunk:
    text: str


@dataclass(frozen=True)
class LazyResult:
    """What LazyRAG retrieved: ``entities`` (``{"id", "label", "hops", "score",
    "community"?}``), ``relationships`` (``{"s", "p", "o", "text", "document_id",
    "chunk_id"}``), ``communities`` (``{"id", "level", "size", "members",
    "relations"}``), ``confidence`` (0-1), ``missing_info`` (what the graph does not
    cover), ``generation_time_ms``, ``community_cache`` (``"hit"``: the communities
    were cached, ``"miss"``: computed for this question; None: not used), and
    ``summary_error`` (``{"type", "message"}``) when the LLM failed and the answer has
    no text."""

    entities: list[dict[str, Any]] = field(default_factory=list)
    relationships: list[dict[str, Any]] = field(default_factory=list)
    communities: list[dict[str, Any]] = field(default_factory=list)
    confidence: float | None = None
    missing_info: list[str] = field(default_factory=list)
    generation_time_ms: float | None = None
    community_cache: str | None = None
    summary_error: dict[str, str] | None = None

    @classmethod
    def of(cls, record: dict[str, Any]) -> "LazyResult | None":
        """The lazy fields of a final record or ``done`` line; None when it has none
        (a graph-rag or document-rag answer)."""
        if not any(key in record for key in LAZY_FIELDS):
            return None
        return cls(**{key: record[key] for key in LAZY_FIELDS
                      if record.get(key) is not None})


LAZY_FIELDS = tuple(item.name for item in fields(LazyResult))


@dataclass(frozen=True)
class Final:
    sources: list[Source]
    usage: Usage
    lazy: LazyResult | None = None  # lazy-rag answers only


RagEvent = Metadata | Chunk | Final


class Answer(Completion):
    """The whole answer (it *is* a ``str``) with its ``usage``, ``sources``,
    ``optimized_query``, ``subqueries`` and ``request_id``."""

    sources: list[Source]
    optimized_query: str | None
    subqueries: list[str]
    request_id: str | None
    lazy: "LazyResult | None" = None  # a lazy-rag answer's (``LazyAnswer``)

    def __new__(cls, text: str, usage: Usage, metadata: Metadata,
                sources: list[Source] | None = None) -> Self:
        answer = super().__new__(cls, text, usage)
        answer.sources = metadata.sources if sources is None else sources
        answer.optimized_query = metadata.optimized_query
        answer.subqueries = metadata.subqueries
        answer.request_id = metadata.request_id
        return answer


class LazyAnswer(Answer):
    """A lazy-rag ``Answer``: its ``lazy`` result's fields read as its own
    (``.confidence``, ``.missing_info``, ``.entities``, ``.relationships``,
    ``.communities``, ``.generation_time_ms``, ``.community_cache``,
    ``.summary_error``)."""

    lazy: LazyResult

    def __new__(cls, text: str, usage: Usage, metadata: Metadata, sources: list[Source],
                lazy: LazyResult) -> Self:
        answer = super().__new__(cls, text, usage, metadata, sources)
        answer.lazy = lazy
        return answer

    def __getattr__(self, name: str) -> Any:
        if name in LAZY_FIELDS:
            return getattr(self.lazy, name)
        raise AttributeError(name)


def answer_of(text: str, usage: Usage, metadata: Metadata, sources: list[Source],
              lazy: LazyResult | None) -> Answer:
    """An ``Answer``, or a ``LazyAnswer`` when the answer came with a ``LazyResult``."""
    if lazy is None:
        return Answer(text, usage, metadata, sources)
    return LazyAnswer(text, usage, metadata, sources, lazy)


class RagStream:
    """An answer as ``Metadata``, ``Chunk``..., ``Final`` events (iterate it once).

    ``events`` opens the request when iteration starts. ``metadata`` is set once the
    first event is out; ``sources`` and ``usage`` are complete once the stream has
    ended. Breaking out of the loop cancels the request (and its LLM stream).
    """

    def __init__(self, events: Callable[[], AsyncGenerator[RagEvent, None]]) -> None:
        self._events = events
        self._started = False
        self.metadata: Metadata | None = None
        self.final: Final | None = None

    @property
    def sources(self) -> list[Source]:
        if self.final is not None:
            return self.final.sources
        return self.metadata.sources if self.metadata is not None else []

    @property
    def usage(self) -> Usage:
        return self.final.usage if self.final is not None else Usage()

    @property
    def lazy(self) -> LazyResult | None:
        """A lazy-rag answer's ``LazyResult``, once the stream has ended."""
        return self.final.lazy if self.final is not None else None

    def __aiter__(self) -> AsyncIterator[RagEvent]:
        if self._started:
            raise RuntimeError("a RagStream can be iterated only once")
        self._started = True
        return self._tracked()

    async def _tracked(self) -> AsyncGenerator[RagEvent, None]:
        async with aclosing(self._events()) as events:
            async for event in events:
                if isinstance(event, Metadata):
                    self.metadata = event
                elif isinstance(event, Final):
                    self.final = event
                yield event

    async def collect(self) -> Answer:
        """The whole answer, with its sources and usage."""
        parts = [event.text async for event in self if isinstance(event, Chunk)]
        return answer_of("".join(parts), self.usage, self.metadata or Metadata([]),
                         self.sources, self.lazy)


async def events_from_frames(responses: AsyncGenerator[dict[str, Any], None]
                             ) -> AsyncGenerator[RagEvent, None]:
    """The websocket's RAG frames (PROTOCOL §2) as events. A non-streaming answer
    (one frame with the whole ``response``) gives the same three kinds of event."""
    usage = Usage()
    metadata: Metadata | None = None
    async with aclosing(responses):
        async for response in responses:
            usage.add(Usage.of(response))
            kind = response.get("message_type")
            if kind == "progress":  # asked for with ``progress``; not an answer event
                continue
            if metadata is None:  # the metadata frame, or the only frame
                metadata = Metadata(response.get("sources") or [],
                                    response.get("optimized_query"),
                                    response.get("subqueries") or [])
                yield metadata
            text = response.get("chunk") if kind else response.get("response")
            if text:
                yield Chunk(text)
            if response.get("end_of_stream"):
                yield Final(response.get("sources") or metadata.sources, usage,
                            LazyResult.of(response))


async def events_from_lines(lines: AsyncGenerator[dict[str, Any], None]
                            ) -> AsyncGenerator[RagEvent, None]:
    """The answer-stream API's NDJSON lines (PROTOCOL §3) as events; an ``error`` line
    raises ``TrustGraphError``."""
    metadata = Metadata([])
    async with aclosing(lines):
        async for line in lines:
            kind = line.get("type")
            if kind == "metadata":
                metadata = Metadata(line.get("sources") or [], line.get("optimized_query"),
                                    line.get("subqueries") or [], line.get("request_id"))
                yield metadata
            elif kind == "content":
                yield Chunk(line.get("delta") or "")
            elif kind == "done":
                yield Final(metadata.sources, _usage(line.get("usage")), LazyResult.of(line))
                return
            elif kind == "error":
                raise TrustGraphError(str(line.get("error_type") or "error"),
                                      str(line.get("message") or "no message given"))
    raise TrustGraphError("connection", "the answer stream ended before its done line")


def answer_from(body: dict[str, Any]) -> Answer:
    """The answer-stream API's collected answer (``stream: false``)."""
    metadata = Metadata(body.get("sources") or [], body.get("optimized_query"),
                        body.get("subqueries") or [], body.get("request_id"))
    return answer_of(body.get("response") or "", _usage(body.get("usage")), metadata,
                     metadata.sources, LazyResult.of(body))


def _usage(value: Any) -> Usage:
    value = value if isinstance(value, dict) else {}
    return Usage.of(value)
