"""An answer gathered whole from its events (``trustgraph.answers``): what every API
that answers at once renders (the answer-stream API with ``stream: false``, a
``chat.completion``, an MCP tool's result, LazyRAG's envelope)."""
from typing import Any

from trustgraph.answers import Done, Event, Opened, Sources, Step, Text
from trustgraph.schema import Error, Usage


class Collected:
    """The text, the steps (each whole: the pieces of one thought or observation
    joined), what the answer opened with, and how it ended."""

    def __init__(self) -> None:
        self.opened = Opened()
        self.parts: list[str] = []
        self.steps: list[Step] = []
        self.sources: list[dict[str, Any]] | None = None  # the latest the answer gave
        self.done: Done | None = None
        self._open = False  # the last step is still receiving pieces

    def add(self, events: list[Event]) -> None:
        for event in events:
            if type(event) is Text:
                self.parts.append(event.delta)
            elif type(event) is Step:
                self._step(event)
            elif type(event) is Opened:
                self.opened, self.sources = event, event.sources
            elif type(event) is Sources:
                self.sources = event.sources
            elif type(event) is Done:
                self.done = event
                self.sources = event.sources if event.sources is not None else self.sources

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def usage(self) -> Usage:
        return self.done.usage if self.done is not None else Usage()

    @property
    def result(self) -> dict[str, Any]:
        """The service's own result fields (``Done.result``)."""
        return self.done.result if self.done is not None else {}

    @property
    def failure(self) -> Error | None:
        """The text failed while the result stands (``Done.failure``)."""
        return self.done.failure if self.done is not None else None

    @property
    def session_id(self) -> str | None:
        if self.done is not None and self.done.session_id is not None:
            return self.done.session_id
        return self.opened.session_id

    def _step(self, step: Step) -> None:
        if self._open and self.steps[-1].kind == step.kind:
            last = self.steps[-1]  # our own copy: the events stay as they were read
            last.delta += step.delta
            last.ends = step.ends
        elif step.delta or step.tool is not None:
            self.steps.append(Step(step.kind, step.delta, step.ends, step.tool, step.arguments))
        else:
            return  # an empty piece that ends no open step
        self._open = not step.ends
