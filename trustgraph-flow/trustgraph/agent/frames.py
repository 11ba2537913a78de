"""The frames of a dialog (PROTOCOL §2 "agent", seed 003 "Agent Streaming
Behavior"), built here and nowhere else.

A thought streams as ``thought`` frames (``Delta``s of kind ``thought`` in the
agent's process), the last with ``end_of_message``; an action is one frame naming
the tool and its arguments; an observation is one frame; the answer streams as
``answer`` frames (``Delta``s of kind ``answer``), and the dialog's end is one more
answer frame, with no text, ``end_of_message`` and ``end_of_dialog``, the token
totals and the session id.
"""
from typing import Any

from trustgraph.schema import AgentResponse, Source, Usage


def thought(text: str, done: bool = False) -> AgentResponse:
    return AgentResponse(chunk_type="thought", content=text, end_of_message=done)


def action(tool: str, arguments: dict[str, Any]) -> AgentResponse:
    return AgentResponse(chunk_type="action", content=tool, tool=tool, arguments=arguments,
                         end_of_message=True)


def observation(text: str) -> AgentResponse:
    return AgentResponse(chunk_type="observation", content=text, end_of_message=True)


def route_thought(route: str, question: str, sources: list[Source]) -> AgentResponse:
    """``ask``: the route and the question answered, with the evidence, before the
    answer's first token."""
    return AgentResponse(chunk_type="thought", route=route, sources=sources,
                         content=f"Route: {route}. Question: {question}",
                         end_of_message=True)


def dialog_end(session_id: str, usage: Usage) -> AgentResponse:
    """The dialog's last frame: the answer's end, the session, and the token totals
    of every LLM call of the dialog."""
    return AgentResponse(chunk_type="answer", end_of_message=True, end_of_dialog=True,
                         session_id=session_id, in_token=usage.in_token,
                         out_token=usage.out_token, model=usage.model)
