"""The ``react`` pattern: Thought → Action → Observation, until a final answer.

Each iteration is one ``agent-react`` prompt call, generated under the step schema
(``step_schema.py``): a thought, then a call of one of the offered tools, with
arguments that fit its declared parameters, or the final answer. So the model
decides by the shape of its reply, which its server holds it to, not by prose a
parser hopes to follow. The step streams: ``step_reader.py`` passes the thought (and
the answer) on as its JSON string grows, the one place a token is re-shaped on its
way; the layers above pass its frames on unread. The tool then runs and its result
is the observation the next iteration sees.

Every dialog ends with an answer when the model can give one: the last iteration
(``max_iterations``) and the step after a repeated call (the same tool with the same
arguments: not run again, its earlier result is the observation) are asked under an
answer-only schema, as is every step when no tool is offered. A step the agent cannot
follow (a reply that failed the schema even so, a tool's own complaint about its
arguments) is told to the model as that step's observation; after ``MAX_MALFORMED``
such steps the dialog fails with a clear error. An answer cut short after it began
streaming ends the dialog as it stands: it is what the user has seen, as with any
text cut at ``max_tokens``.
"""
import logging
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from trustgraph.base import Delta, HandledError, Relay, ServiceError
from trustgraph.base.steps import step as call_step
from trustgraph.schema import AgentResponse, AgentStep
from trustgraph.schema.text_completion import OFF_SCHEMA
from trustgraph.schema.tool import ToolDefinition

from . import frames
from .dialog import Dialog, Frames, Pattern
from .sessions import Turn
from .step_reader import StepReader
from .step_schema import ANSWER_CHARS, step_schema
from .tool_calls import BadArguments, ToolFailed, run_tool
from .toolbox import described

log = logging.getLogger(__name__)

TEMPLATE = "agent-react"
ERROR = "agent-error"
MAX_MALFORMED = 2  # malformed steps told to the model; the next one ends the dialog


@dataclass
class ReactLimits:
    max_iterations: int
    tool_timeout: float  # seconds, for tools outside the platform (MCP servers)
    answer_chars: int = ANSWER_CHARS  # the longest final answer the step schema allows


class Unfollowed(Exception):
    """A step the agent cannot follow; the model is told why."""


def react(tools: dict[str, ToolDefinition], limits: ReactLimits) -> Pattern:
    """The pattern, over the tools offered to this dialog."""
    async def pattern(dialog: Dialog) -> Frames:
        steps = list(dialog.request.history or [])
        malformed, answer_only = 0, not tools
        iterations = dialog.request.max_iterations or limits.max_iterations
        for iteration in range(1, iterations + 1):
            reader = StepReader()
            schema = step_schema(tools, answer_only or iteration == iterations,
                                 limits.answer_chars)
            try:
                yield Relay(_think(dialog, steps, reader, tools, schema))
                step = reader.step
                if step.answer is not None:
                    yield await dialog.end(step.answer)
                    return
                tool = _chosen(step.tool, tools)
                yield frames.action(tool.name, step.arguments)
                earlier = _earlier(steps, tool.name, step.arguments)
                result = earlier if earlier is not None else await _observed(
                    tool, step.arguments, dialog, limits)
                answer_only = answer_only or earlier is not None
            except Unfollowed as problem:
                malformed += 1
                if malformed > MAX_MALFORMED:
                    raise HandledError(ERROR, f"the model's reply could not be followed "
                                              f"{malformed} times; last: {problem}") from None
                result = f"Your reply could not be used: {problem}"
            yield frames.observation(result)
            steps.append(AgentStep(thought=reader.step.thought, action=reader.step.tool,
                                   arguments=reader.step.arguments, observation=result))
        raise HandledError(ERROR, f"no final answer within max_iterations ({iterations})")
    return pattern


async def _think(dialog: Dialog, steps: list[AgentStep], reader: StepReader,
                 tools: dict[str, ToolDefinition], schema: dict[str, Any]
                 ) -> AsyncIterator[Delta | AgentResponse]:
    """One step, streamed as it is written. A reply that failed the step schema is
    ``Unfollowed``, unless its answer had begun: that ends the dialog as it stands."""
    variables = {"question": dialog.request.question, "tools": described(tools),
                 "history": [step.model_dump() for step in steps],
                 "context": conversation(dialog.turns)}
    failure = None
    with call_step(ERROR, f"asking the model ({TEMPLATE})"):
        try:
            async with aclosing(dialog.prompts.stream(TEMPLATE, variables, dialog.counted,
                                                      schema=schema)) as pieces:
                async for piece in pieces:
                    if not isinstance(piece, Delta):
                        break  # the end: its tokens are counted
                    for kind, text in reader.feed(piece.text):
                        yield _frame(kind, text)
        except ServiceError as error:
            if error.error.type != OFF_SCHEMA:
                raise
            failure = error.error.message
    for kind, text in reader.finish():
        yield _frame(kind, text)
    if failure is not None:
        if reader.step.answer:
            log.warning("the model's answer was cut short (%s); it ends the dialog as "
                        "it stands", failure)
        else:
            reader.step.answer = None
            raise Unfollowed(failure)


def _frame(kind: str, text: str) -> Delta | AgentResponse:
    """A reader's event as a frame: text as the model writes it is a delta of its
    kind (thought, answer); the end of a thought is a frame of its own."""
    if kind == "thought_end":
        return frames.thought(text, done=True)
    return Delta(text, kind)


def _chosen(name: str, tools: dict[str, ToolDefinition]) -> ToolDefinition:
    """The tool a step calls (the schema allows only the offered ones; a server that
    did not hold the model to it is told)."""
    if name not in tools:
        known = ", ".join(tools) or "none"
        raise Unfollowed(f"there is no tool called {name!r} (tools: {known})")
    return tools[name]


def _earlier(steps: list[AgentStep], tool: str, arguments: dict[str, Any]) -> str | None:
    """The observation of an earlier call of ``tool`` with these ``arguments``."""
    return next((step.observation for step in steps
                 if step.action == tool and step.arguments == arguments), None)


async def _observed(tool: ToolDefinition, arguments: dict[str, Any], dialog: Dialog,
                    limits: ReactLimits) -> str:
    try:
        return await run_tool(tool, arguments, dialog.request, dialog.clients,
                              dialog.usage, limits.tool_timeout)
    except ToolFailed as failure:  # the model may try another way
        return f"The tool failed: {failure}"
    except BadArguments as problem:
        raise Unfollowed(str(problem)) from None


def conversation(turns: list[Turn]) -> str:
    """Earlier turns of the session, as the ``context`` of the prompt."""
    return "\n".join(f"Earlier question: {turn.question}\nEarlier answer: {turn.answer}"
                     for turn in turns)
