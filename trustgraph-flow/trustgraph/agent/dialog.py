"""One dialog, whatever its pattern: what a pattern is given, and what is done with
the frames it yields.

A pattern (``react``, ``ask``) is an async generator of frames ending with the
answer's last frame (``end_of_message``). The dialog turns that frame into the
dialog's end: it saves the turn to the session first (so a turn is kept only when
its answer was complete: a cancelled dialog never gets there), then sends it with
``end_of_dialog``, the session id and the token totals of every LLM call. Without
``streaming`` the same frames are collected into one answer frame, so the two ways
cannot drift.
"""
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from trustgraph.base import PromptClient
from trustgraph.schema import AgentRequest, AgentResponse, Usage

from .frames import dialog_end, is_last_answer
from .sessions import SessionStore, Turn


@dataclass
class Dialog:
    request: AgentRequest
    session_id: str
    turns: list[Turn]  # the session's earlier turns, oldest first
    clients: Any  # the flow's service clients
    prompts: PromptClient
    usage: Usage  # every LLM call of the dialog adds to it


Pattern = Callable[[Dialog], AsyncGenerator[AgentResponse, None]]


async def run_dialog(dialog: Dialog, pattern: Pattern, sessions: SessionStore
                     ) -> AsyncGenerator[AgentResponse, None]:
    frames = _ended(dialog, pattern, sessions)
    if not dialog.request.streaming:
        frames = _collected(frames)
    async with aclosing(frames) as records:
        first = True
        async for frame in records:
            if first:  # the client learns its session id at once, and again at the end
                frame.session_id, first = dialog.session_id, False
            yield frame


async def _ended(dialog: Dialog, pattern: Pattern, sessions: SessionStore
                 ) -> AsyncGenerator[AgentResponse, None]:
    answer: list[str] = []
    async with aclosing(pattern(dialog)) as frames:
        async for frame in frames:
            if frame.chunk_type == "answer":
                answer.append(frame.content)
            if is_last_answer(frame):
                await sessions.save(dialog.request.user, dialog.session_id,
                                    dialog.request.question, "".join(answer))
                yield dialog_end(frame, dialog.session_id, dialog.usage)
                return
            yield frame
    raise RuntimeError("the dialog ended without an answer")


async def _collected(frames: AsyncGenerator[AgentResponse, None]
                     ) -> AsyncGenerator[AgentResponse, None]:
    """One frame: the whole answer, with the route and sources the dialog gave."""
    answer: list[str] = []
    found: dict[str, Any] = {}
    async with aclosing(frames) as records:
        async for frame in records:
            if frame.chunk_type == "answer":
                answer.append(frame.content)
            found.update({name: value for name, value in
                          (("route", frame.route), ("sources", frame.sources))
                          if value is not None})
            if frame.end_of_dialog:
                yield frame.model_copy(update={"content": "".join(answer), **found})
                return
