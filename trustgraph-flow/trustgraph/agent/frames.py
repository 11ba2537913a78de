"""The frames of a dialog (PROTOCOL §2 "agent", seed 003 "Agent Streaming
Behavior"), built here and nowhere else.

A thought streams as ``thought`` frames, the last with ``end_of_message``; an action
is one frame naming the tool and its arguments; an observation is one frame; the
answer streams as ``answer`` frames, the last with ``end_of_message`` (the dialog
then adds ``end_of_dialog``, the token totals and the session id to that one).
"""
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from trustgraph.base import PromptClient
from trustgraph.schema import AgentResponse, Source, Usage


def thought(text: str, done: bool = False) -> AgentResponse:
    return AgentResponse(chunk_type="thought", content=text, end_of_message=done)


def action(tool: str, arguments: dict[str, Any]) -> AgentResponse:
    return AgentResponse(chunk_type="action", content=tool, tool=tool, arguments=arguments,
                         end_of_message=True)


def observation(text: str) -> AgentResponse:
    return AgentResponse(chunk_type="observation", content=text, end_of_message=True)


def answer(text: str, done: bool = False) -> AgentResponse:
    return AgentResponse(chunk_type="answer", content=text, end_of_message=done)


def route_thought(route: str, question: str, sources: list[Source]) -> AgentResponse:
    """``ask``: the route and the question answered, with the evidence, before the
    answer's first token."""
    return AgentResponse(chunk_type="thought", route=route, sources=sources,
                         content=f"Route: {route}. Question: {question}",
                         end_of_message=True)


def is_last_answer(frame: AgentResponse) -> bool:
    return frame.chunk_type == "answer" and frame.end_of_message


def dialog_end(last_answer: AgentResponse, session_id: str, usage: Usage) -> AgentResponse:
    """The answer's last frame as the dialog's last: the end flags, the session, and
    the token totals of every LLM call of the dialog."""
    return last_answer.model_copy(update={
        "end_of_dialog": True, "end_of_stream": True, "session_id": session_id,
        "in_token": usage.in_token, "out_token": usage.out_token, "model": usage.model})


async def answer_frames(prompts: PromptClient, template: str, variables: dict[str, Any],
                        usage: Usage) -> AsyncGenerator[AgentResponse, None]:
    """Template ``template``'s text streamed as answer frames; its tokens added to
    ``usage``. Closing this closes the prompt request and its LLM stream."""
    async with aclosing(prompts.stream(template, variables)) as pieces:
        async for piece in pieces:
            if piece.end:
                usage.add(piece.usage)
            elif piece.text:
                yield answer(piece.text)
    yield answer("", done=True)
