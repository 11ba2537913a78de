"""RAG answers (graph-rag, document-rag, lazy-rag, the answer-stream API) as events.

Every answer is, in order: one ``Metadata`` event (the sources, known before the
first token; the rewritten question and sub-questions), ``Chunk`` events carrying
the answer's text deltas, and one ``Final`` event with the sources and the token
usage (and, for a service with a result of its own, its ``Result``: lazy-rag's
``LazyResult``, the subgraph the answer was written from, its confidence and what is
missing). Both transports give the same events: the websocket's RAG frames, read by
the one reader every API shares (``events_from_frames``, ``trustgraph.answers``),
and the answer-stream API's NDJSON lines (``events_from_lines``). ``RagStream`` is
what a caller iterates; ``Answer`` is the collected answer.
"""
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self, get_args, get_origin

from ..answers import Done, Failed, Opened, Reader, Text
from ..schema import RagResponse, Response
from .errors import TrustGraphError, error_from
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


class Result:
    """A service's own result beyond the text: the fields its response model declares
    (``result_fields``), as the plain JSON the wire carries, read as attributes. A
    field left out reads as ``[]`` when it holds a list, else ``None``. A service's
    subclass names its model (``model``) and the answer it comes with (``answer``)."""

    model: ClassVar[type[Response]] = Response
    answer: ClassVar[type["Answer"]]  # Answer, once it is defined below
    _of_model: ClassVar[dict[type[Response], type["Result"]]] = {}
    _values: dict[str, Any]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        Result._of_model[cls.model] = cls

    def __init__(self, **values: Any) -> None:
        unknown = set(values) - set(self.model.result_fields)
        if unknown:
            raise TypeError(f"{type(self).__name__}: no field {', '.join(sorted(unknown))}")
        self._values = {name: _empty(self.model, name) if values.get(name) is None
                        else values[name] for name in self.model.result_fields}

    @classmethod
    def of(cls, record: dict[str, Any]) -> Self | None:
        """The result in a final record or ``done`` line; None when it has none of
        the fields (an answer of a service with no result of its own)."""
        if not any(name in record for name in cls.model.result_fields):
            return None
        return cls(**{name: record[name] for name in cls.model.result_fields
                      if name in record})

    @staticmethod
    def of_model(model: type[Response]) -> "type[Result]":
        """The result of answers of ``model``: its service's own class, if any."""
        if model not in Result._of_model:
            type(f"{model.__name__.removesuffix('Response')}Result", (Result,),
                 {"model": model, "answer": Answer})
        return Result._of_model[model]

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values", {})
        if name in values:
            return values[name]
        raise AttributeError(name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Result) and type(other) is type(self) \
            and other._values == self._values

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self._values.items())})"


def _empty(model: type[Response], name: str) -> Any:
    annotation = model.model_fields[name].annotation
    held = (annotation, *get_args(annotation))
    return [] if any(get_origin(kind) is list for kind in held) else None


@dataclass(frozen=True)
class Final:
    sources: list[Source]
    usage: Usage
    result: Result | None = None  # the service's own (lazy-rag: its LazyResult)

    @property
    def lazy(self) -> Any:
        """lazy-rag's ``LazyResult`` (``result``, by the name it has always had)."""
        return self.result


RagEvent = Metadata | Chunk | Final


class Answer(Completion):
    """The whole answer (it *is* a ``str``) with its ``usage``, ``sources``,
    ``optimized_query``, ``subqueries`` and ``request_id``, and the service's own
    ``result`` (if any), whose fields read as the answer's own."""

    sources: list[Source]
    optimized_query: str | None
    subqueries: list[str]
    request_id: str | None
    result: Result | None

    def __new__(cls, text: str, usage: Usage, metadata: Metadata,
                sources: list[Source] | None = None, result: Result | None = None) -> Self:
        answer = super().__new__(cls, text, usage)
        answer.sources = metadata.sources if sources is None else sources
        answer.optimized_query = metadata.optimized_query
        answer.subqueries = metadata.subqueries
        answer.request_id = metadata.request_id
        answer.result = result
        return answer

    @property
    def lazy(self) -> Any:
        """lazy-rag's ``LazyResult`` (``result``, by the name it has always had)."""
        return self.result

    def __getattr__(self, name: str) -> Any:
        result = self.__dict__.get("result")
        if result is None:
            raise AttributeError(name)
        return getattr(result, name)


Result.answer = Answer


def answer_of(text: str, usage: Usage, metadata: Metadata, sources: list[Source],
              result: Result | None) -> Answer:
    """An ``Answer``, or the answer its result comes with (lazy-rag's ``LazyAnswer``)."""
    kind = Answer if result is None else result.answer
    return kind(text, usage, metadata, sources, result)


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
    def result(self) -> Result | None:
        """The service's own result (lazy-rag's ``LazyResult``), once the stream has
        ended."""
        return self.final.result if self.final is not None else None

    @property
    def lazy(self) -> Any:
        """lazy-rag's ``LazyResult`` (``result``, by the name it has always had)."""
        return self.result

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
                         self.sources, self.result)


async def events_from_frames(responses: AsyncGenerator[dict[str, Any], None],
                             model: type[Response] = RagResponse
                             ) -> AsyncGenerator[RagEvent, None]:
    """The websocket's RAG frames (PROTOCOL §2) of a service answering with ``model``
    as events. A non-streaming answer (one frame with the whole ``response``) gives
    the same three kinds of event."""
    reader, result = Reader(model), Result.of_model(model)
    metadata = Metadata([])
    async with aclosing(responses):
        async for response in responses:
            for event in reader.read(response):
                if type(event) is Opened:
                    metadata = Metadata(event.sources or [], event.optimized_query,
                                        event.subqueries)
                    yield metadata
                elif type(event) is Text:
                    yield Chunk(event.delta)
                elif type(event) is Done:
                    yield Final(event.sources or metadata.sources, event.usage,
                                result.of(event.result))
                elif type(event) is Failed:
                    raise error_from(event.error.model_dump())


async def events_from_lines(lines: AsyncGenerator[dict[str, Any], None],
                            model: type[Response] = RagResponse
                            ) -> AsyncGenerator[RagEvent, None]:
    """The answer-stream API's NDJSON lines (PROTOCOL §3) of a service answering with
    ``model`` as events; an ``error`` line raises ``TrustGraphError``."""
    metadata, result = Metadata([]), Result.of_model(model)
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
                yield Final(metadata.sources, _usage(line.get("usage")), result.of(line))
                return
            elif kind == "error":
                raise TrustGraphError(str(line.get("error_type") or "error"),
                                      str(line.get("message") or "no message given"))
    raise TrustGraphError("connection", "the answer stream ended before its done line")


def answer_from(body: dict[str, Any], model: type[Response] = RagResponse) -> Answer:
    """The answer-stream API's collected answer (``stream: false``) of a service
    answering with ``model``."""
    metadata = Metadata(body.get("sources") or [], body.get("optimized_query"),
                        body.get("subqueries") or [], body.get("request_id"))
    return answer_of(body.get("response") or "", _usage(body.get("usage")), metadata,
                     metadata.sources, Result.of_model(model).of(body))


def _usage(value: Any) -> Usage:
    value = value if isinstance(value, dict) else {}
    return Usage.of(value)
