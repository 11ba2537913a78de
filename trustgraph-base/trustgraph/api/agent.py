"""The agent's dialog (PROTOCOL §2 "agent") as typed events.

A dialog is, in order: ``AgentThought`` pieces (the agent reasoning), an
``AgentAction`` (the tool it calls, with its arguments), ``AgentObservation`` pieces
(what the tool answered), again as the agent reasons; then ``AgentAnswer`` pieces,
and one ``AgentFinal`` with the usage of the whole dialog and its session id. Pieces
of one message share its type; the one ending it has ``end_of_message`` true.
``AgentStream`` is what a caller iterates; ``AgentResult`` is the collected answer.
"""
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Self

from ..answers import Done, Failed, Reader, Step, Text
from ..schema import AgentResponse, Usage
from .errors import error_from
from .rag import Source
from .streams import Completion


@dataclass(frozen=True)
class AgentThought:
    text: str
    end_of_message: bool = False


@dataclass(frozen=True)
class AgentAction:
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    text: str = ""  # what the frame said besides the tool, if anything


@dataclass(frozen=True)
class AgentObservation:
    text: str
    end_of_message: bool = False


@dataclass(frozen=True)
class AgentAnswer:
    text: str
    end_of_message: bool = False


@dataclass(frozen=True)
class AgentFinal:
    usage: Usage
    session_id: str | None = None  # pass it to the next question to continue
    sources: list[Source] = field(default_factory=list)


AgentStep = AgentThought | AgentAction | AgentObservation
AgentEvent = AgentStep | AgentAnswer | AgentFinal


class AgentResult(Completion):
    """The answer (it *is* a ``str``) with its ``usage``, ``session_id``, ``sources``
    and ``steps``: the thoughts, actions and observations before it, each whole."""

    session_id: str | None
    sources: list[Source]
    steps: list[AgentStep]

    def __new__(cls, text: str, final: AgentFinal, steps: list[AgentStep]) -> Self:
        result = super().__new__(cls, text, final.usage)
        result.session_id = final.session_id
        result.sources = final.sources
        result.steps = steps
        return result


class AgentStream:
    """A dialog as events (iterate it once). ``events`` opens the request when
    iteration starts; ``final`` (and so ``usage``, ``session_id``) is set once the
    dialog has ended. Breaking out of the loop cancels the request, and with it the
    agent's LLM stream and any tool call in flight."""

    def __init__(self, events: Callable[[], AsyncGenerator[AgentEvent, None]]) -> None:
        self._events = events
        self._started = False
        self.final: AgentFinal | None = None

    @property
    def usage(self) -> Usage:
        return self.final.usage if self.final is not None else Usage()

    @property
    def session_id(self) -> str | None:
        return self.final.session_id if self.final is not None else None

    def __aiter__(self) -> AsyncIterator[AgentEvent]:
        if self._started:
            raise RuntimeError("an AgentStream can be iterated only once")
        self._started = True
        return self._tracked()

    async def _tracked(self) -> AsyncGenerator[AgentEvent, None]:
        async with aclosing(self._events()) as events:
            async for event in events:
                if isinstance(event, AgentFinal):
                    self.final = event
                yield event

    async def collect(self) -> AgentResult:
        """The whole answer, with the steps before it, joined message by message."""
        answer: list[str] = []
        steps: list[AgentStep] = []
        open_step = False  # the last step is still receiving pieces
        async for event in self:
            if isinstance(event, AgentAnswer):
                answer.append(event.text)
            elif isinstance(event, (AgentThought, AgentObservation)):
                if open_step and type(steps[-1]) is type(event):
                    event = type(event)(steps.pop().text + event.text, event.end_of_message)
                steps.append(event)
                open_step = not event.end_of_message
            elif isinstance(event, AgentAction):
                steps.append(event)
                open_step = False
        final = self.final or AgentFinal(Usage())
        return AgentResult("".join(answer), final, steps)


async def events_from_frames(responses: AsyncGenerator[dict[str, Any], None]
                             ) -> AsyncGenerator[AgentEvent, None]:
    """The websocket's agent frames as events, read by the one reader every API
    shares (``trustgraph.answers``). An error frame raises ``TrustGraphError`` (the
    transport raises those carrying ``error``)."""
    reader = Reader(AgentResponse)
    async with aclosing(responses):
        async for response in responses:
            for event in reader.read(response):
                if type(event) is Step:
                    yield _step(event)
                elif type(event) is Text:
                    yield AgentAnswer(event.delta, event.ends)
                elif type(event) is Done:
                    yield AgentFinal(event.usage, event.session_id, event.sources or [])
                    return
                elif type(event) is Failed:
                    raise error_from(event.error.model_dump())


def _step(step: Step) -> AgentStep:
    if step.kind == "action":
        return AgentAction(step.tool or step.delta, step.arguments or {}, step.delta)
    if step.kind == "observation":
        return AgentObservation(step.delta, step.ends)
    return AgentThought(step.delta, step.ends)
