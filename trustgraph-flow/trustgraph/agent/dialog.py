"""One dialog, whatever its pattern: what a pattern is given, and how it ends.

A pattern (``react``, ``ask``) is an async generator of frames (and of sub-streams of
frames, ``Relay``s, read in their place) that ends with ``await dialog.end(answer)``:
the dialog's last frame, sent once the turn is saved to the session (so a turn is
kept only when its answer was complete: a cancelled dialog never gets there), with
``end_of_dialog``, the session id and the token totals of every LLM call.
``run_dialog`` also puts the session id on the first frame; without ``streaming`` it
collects the same frames into one answer frame, so the two ways cannot drift. Both
read the pattern's frames as the runner does (``Items``); streaming, once the first
frame is found the runner reads the rest itself.
"""
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from trustgraph.base import Clients, Delta, Items, PromptClient, Relay, Yielded
from trustgraph.base.relay import as_record
from trustgraph.schema import AgentRequest, AgentResponse, PromptResponse, Usage

from .frames import dialog_end
from .sessions import SessionStore, Turn


@dataclass
class Dialog:
    request: AgentRequest
    session_id: str
    turns: list[Turn]  # the session's earlier turns, oldest first
    clients: Clients  # the flow's service clients
    prompts: PromptClient
    usage: Usage  # every LLM call of the dialog adds to it
    sessions: SessionStore

    def counted(self, final: PromptResponse) -> None:
        """A prompt's final record (``PromptClient.stream``'s ``last``): its tokens
        added to the dialog's."""
        self.usage.add(Usage.of(final))

    async def end(self, answer: str) -> AgentResponse:
        """The dialog's last frame, once the turn (``answer`` the whole answer) is
        saved."""
        await self.sessions.save(self.request.user, self.session_id, self.request.question,
                                 answer)
        return dialog_end(self.session_id, self.usage)


Frames = AsyncIterator[Yielded[AgentResponse]]
Pattern = Callable[[Dialog], Frames]


def run_dialog(dialog: Dialog, pattern: Pattern) -> Relay[AgentResponse]:
    """The dialog's frames, for the runner to read."""
    frames = Items(pattern(dialog))
    return Relay(_opened(dialog, frames) if dialog.request.streaming else
                 _collected(dialog, frames))


async def _opened(dialog: Dialog, frames: Items[AgentResponse]) -> Frames:
    """The first frame with the session id (the client learns it at once, and again at
    the end), then the others as they come: relayed, so the runner takes over
    ``frames``' open generators and reads them itself (``Items``), with nothing of
    this dialog in between."""
    async with aclosing(frames):
        item = await anext(frames)
        first = as_record(AgentResponse, item) if isinstance(item, Delta) else item
        first.session_id = dialog.session_id
        yield first
        yield Relay(frames)


async def _collected(dialog: Dialog, frames: Items[AgentResponse]
                     ) -> AsyncIterator[AgentResponse]:
    """One frame: the whole answer, with the route and sources the dialog gave."""
    answer: list[str] = []
    found: dict[str, Any] = {}
    async with aclosing(frames):
        async for item in frames:
            if isinstance(item, Delta):
                if item.kind == "answer":
                    answer.append(item.text)
                continue
            frame = item
            if frame.chunk_type == "answer":
                answer.append(frame.content)
            found.update({name: value for name, value in
                          (("route", frame.route), ("sources", frame.sources))
                          if value is not None})
            if frame.end_of_dialog:
                yield frame.model_copy(update={"content": "".join(answer), **found})
                return
