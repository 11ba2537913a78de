"""Calling the prompt service: a template id and its variables in, text or a parsed
JSON object out. Streaming is the prompt service's answer relayed (``relay``): its
deltas as they come, then whatever ``last`` makes of its final record; a handler
hands it to the runner as a sub-stream:

    yield Relay(prompts.stream("kg-prompt", variables, last=lambda final: my_record(final)))
"""
import json
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..schema import PromptRequest, PromptResponse, Usage
from .relay import Delta, relay
from .requester import ServiceClient

R = TypeVar("R")


@dataclass
class PromptResult:
    """A template's whole answer."""

    text: str | None  # text templates
    object: Any  # json/jsonl templates: the parsed answer
    in_token: int | None
    out_token: int | None
    model: str | None

    @property
    def value(self) -> Any:
        return self.text if self.text is not None else self.object

    @property
    def usage(self) -> Usage:
        return Usage.of(self)


class PromptClient:
    def __init__(self, requester: ServiceClient) -> None:
        self.requester = requester

    def stream(self, id: str, variables: dict[str, Any],
               last: Callable[[PromptResponse], R], model: str | None = None,
               sampling: dict[str, Any] | None = None, schema: dict[str, Any] | None = None
               ) -> AsyncGenerator[Delta | R, None]:
        """Run text template ``id`` streaming: its deltas as they arrive (those
        already waiting joined into one), then ``last(the final record)``, which has
        the token totals and no text. The requester reads ahead into its own bounded
        buffer only, so a caller that falls behind holds the prompt service back.
        Closing the stream (a cancel, a break) cancels the prompt request and its LLM
        stream at once. A service error raises ``ServiceError``. ``model``: answer
        with that model of the configured provider instead of its own; ``sampling``:
        the caller's ``max_tokens``, ``temperature``, ``stop`` (``Sampling.sampling()``);
        ``schema``: a JSON Schema the answer must match (streamed all the same, and
        checked at its end: a failure raises ``ServiceError`` ``off-schema``)."""
        request = PromptRequest(id=id, variables=variables, streaming=True, model=model,
                                json_schema=schema, **(sampling or {}))
        return relay(self.requester.frames(request), PromptResponse, last)

    async def invoke(self, id: str, variables: dict[str, Any], model: str | None = None,
                     sampling: dict[str, Any] | None = None) -> PromptResult:
        """The whole answer, not streamed: the text (or parsed object) with the
        totals."""
        answer = await self.requester.call(
            PromptRequest(id=id, variables=variables, model=model, **(sampling or {})),
            PromptResponse)
        value = json.loads(answer.object) if answer.object is not None else None
        return PromptResult((answer.text or "") if value is None else None, value,
                            answer.in_token, answer.out_token, answer.model)

    async def prompt(self, id: str, variables: dict[str, Any]) -> Any:
        """The text of a text template, or the parsed object of a json/jsonl one."""
        return (await self.invoke(id, variables)).value
