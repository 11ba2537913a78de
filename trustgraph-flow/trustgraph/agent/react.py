"""The ``react`` pattern: Thought → Action → Observation, until a Final Answer.

Each iteration is one ``agent-react`` prompt call, streamed: the parser passes the
thought (and, on the last iteration, the answer) on as the LLM writes it, and the
call is closed as soon as the step is complete (a model that goes on to invent its
own "Observation:" is not read, or paid for, further). The tool then runs and its
result is the observation the next iteration sees. The parser is the one place a
token is re-shaped on its way (into thought and answer frames); the layers above
pass its frames on unread.

A step the agent cannot run (no Action and no Final Answer, an unknown tool, bad
arguments) is told to the model as that step's observation; after ``MAX_MALFORMED``
such steps the dialog fails with a clear error. So does a dialog that reaches
``max_iterations`` without an answer.
"""
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from trustgraph.base import Delta, HandledError, Relay
from trustgraph.base.steps import step as call_step
from trustgraph.schema import AgentResponse, AgentStep
from trustgraph.schema.tool import ToolDefinition

from . import frames
from .dialog import Dialog, Frames, Pattern
from .react_parser import BadArguments, ReactParser, Step, parse_arguments
from .sessions import Turn
from .tool_calls import ToolFailed, run_tool
from .toolbox import described

TEMPLATE = "agent-react"
ERROR = "agent-error"
MAX_MALFORMED = 2  # malformed steps told to the model; the next one ends the dialog
FORMAT = ('Reply with "Thought:", then either "Action:" (a tool from the list) and '
          '"Args:" (a JSON object), or "Final Answer:".')


@dataclass
class ReactLimits:
    max_iterations: int
    tool_timeout: float  # seconds, for tools outside the platform (MCP servers)


def react(tools: dict[str, ToolDefinition], limits: ReactLimits) -> Pattern:
    """The pattern, over the tools offered to this dialog."""
    async def pattern(dialog: Dialog) -> Frames:
        steps = list(dialog.request.history or [])
        malformed = 0
        iterations = dialog.request.max_iterations or limits.max_iterations
        for _ in range(iterations):
            parser = ReactParser()
            yield Relay(_think(dialog, tools, steps, parser))  # its frames, in its place
            step = parser.step
            if step.answer is not None:
                yield await dialog.end(step.answer)
                return
            try:
                tool, arguments = _chosen(step, tools)
                yield frames.action(tool.name, arguments)
                result = await _observed(tool, arguments, dialog, limits)
            except BadArguments as problem:
                malformed += 1
                if malformed > MAX_MALFORMED:
                    raise HandledError(ERROR, f"the model's reply could not be followed "
                                              f"{malformed} times; last: {problem}") from None
                result = f"{problem}. {FORMAT}"
            yield frames.observation(result)
            steps.append(AgentStep(thought=step.thought, action=step.action,
                                   arguments=_arguments_or_empty(step), observation=result))
        raise HandledError(ERROR, f"no final answer within max_iterations ({iterations})")
    return pattern


async def _think(dialog: Dialog, tools: dict[str, ToolDefinition], steps: list[AgentStep],
                 parser: ReactParser) -> AsyncIterator[Delta | AgentResponse]:
    variables = {"question": dialog.request.question, "tools": described(tools),
                 "history": [step.model_dump() for step in steps],
                 "context": conversation(dialog.turns)}
    with call_step(ERROR, f"asking the model ({TEMPLATE})"):
        async with aclosing(dialog.prompts.stream(TEMPLATE, variables,
                                                  dialog.counted)) as pieces:
            async for piece in pieces:
                if not isinstance(piece, Delta):
                    break  # the end: its tokens are counted
                for kind, text in parser.feed(piece.text):
                    yield _frame(kind, text)
                if parser.stopped:
                    break  # closing the stream stops the LLM; its token count is lost
    for kind, text in parser.finish():
        yield _frame(kind, text)


def _frame(kind: str, text: str) -> Delta | AgentResponse:
    """A parser event as a frame: text as the model writes it is a delta of its kind
    (thought, answer); the end of a thought is a frame of its own."""
    if kind == "thought_end":
        return frames.thought(text, done=True)
    return Delta(text, kind)


def _chosen(step: Step, tools: dict[str, ToolDefinition]) -> tuple[ToolDefinition, dict]:
    """The tool and arguments of a step, or ``BadArguments`` saying what is wrong."""
    if not step.action:
        raise BadArguments("Your reply had no Action and no Final Answer")
    if step.action not in tools:
        known = ", ".join(tools) or "none"
        raise BadArguments(f"There is no tool called {step.action!r} (tools: {known})")
    return tools[step.action], parse_arguments(step.arguments_text)


async def _observed(tool: ToolDefinition, arguments: dict[str, Any], dialog: Dialog,
                    limits: ReactLimits) -> str:
    try:
        return await run_tool(tool, arguments, dialog.request, dialog.clients,
                              dialog.usage, limits.tool_timeout)
    except ToolFailed as failure:  # the model may try another way
        return f"The tool failed: {failure}"


def _arguments_or_empty(step: Step) -> dict:
    try:
        return parse_arguments(step.arguments_text)
    except BadArguments:
        return {}


def conversation(turns: list[Turn]) -> str:
    """Earlier turns of the session, as the ``context`` of the prompt."""
    return "\n".join(f"Earlier question: {turn.question}\nEarlier answer: {turn.answer}"
                     for turn in turns)
