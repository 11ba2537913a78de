"""Answers as text: a stream of text deltas taken from a service's response frames,
the token usage gathered on the way, and the collected text.

Every answer-producing service (text-completion, prompt, RAG, ...) streams frames
that carry a piece of text and, somewhere, token counts; they differ only in what
their response model declares, which the one reader reads (``trustgraph.answers``),
so one ``TextStream`` serves them all (``PromptStream`` adds a JSON template's
parsed answer).
"""
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import Any, Self

from ..answers import Done, Failed, Reader, Text
from ..schema import PromptResponse, Response, Usage
from .errors import error_from


class Completion(str):
    """The whole text of an answer (it *is* a ``str``) with its token ``usage``."""

    usage: Usage

    def __new__(cls, text: str, usage: Usage) -> Self:
        completion = super().__new__(cls, text)
        completion.usage = usage
        return completion


class TextStream:
    """An answer's text deltas, as an async iterable (iterate it once).

    ``responses`` opens the request when iteration starts; ``model`` is the service's
    response record. ``usage`` is complete once the stream has ended. Breaking out of
    the loop ends the request on the gateway (see ``GatewaySocket.request``).
    """

    def __init__(self, responses: Callable[[], AsyncGenerator[dict, None]],
                 model: type[Response]) -> None:
        self._responses = responses
        self._reader = Reader(model)
        self._started = False
        self.usage = self._reader.usage  # summed as the frames are read

    def __aiter__(self) -> AsyncIterator[str]:
        if self._started:
            raise RuntimeError("a TextStream can be iterated only once")
        self._started = True
        return self._deltas()

    async def _deltas(self) -> AsyncGenerator[str, None]:
        async with aclosing(self._responses()) as responses:
            async for response in responses:
                for event in self._reader.read(response):
                    if type(event) is Text:
                        yield event.delta
                    elif type(event) is Done:
                        self._done(event)
                    elif type(event) is Failed:
                        raise error_from(event.error.model_dump())

    def _done(self, done: Done) -> None:
        """The answer's end: what it says beyond the text (``PromptStream``)."""

    async def collect(self) -> Completion:
        """The whole answer, with its usage."""
        parts = [delta async for delta in self]
        return Completion("".join(parts), self.usage)


class PromptStream(TextStream):
    """A prompt's answer as text deltas (iterate it once). A JSON template's answer is
    no text but one parsed value: ``object``, set (and ``is_object`` true) once the
    stream has ended."""

    def __init__(self, responses: Callable[[], AsyncGenerator[dict, None]]) -> None:
        super().__init__(responses, PromptResponse)
        self.object: Any = None
        self.is_object = False

    def _done(self, done: Done) -> None:
        if done.result.get("object") is not None:
            self.object = json.loads(done.result["object"])
            self.is_object = True

    async def answer(self) -> Any:
        """The whole answer: the text (a ``Completion``) or the parsed value."""
        text = await self.collect()
        return self.object if self.is_object else text
