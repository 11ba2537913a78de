"""Calling the prompt service: a template id and its variables in, text or a parsed
JSON object out. One way to stream, one async generator; not streaming is the same
stream collected:

    async with aclosing(prompts.stream("kg-prompt", variables)) as pieces:
        async for piece in pieces:
            if not piece.end: send(piece.text)
            else: totals = piece
"""
import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from ..schema import PromptRequest, PromptResponse, Usage, decode
from .requester import Requester, ServiceError


@dataclass
class PromptResult:
    text: str | None  # text templates: a delta while streaming, the whole when collected
    object: Any  # json/jsonl templates: the parsed answer (on the end piece only)
    in_token: int | None
    out_token: int | None
    model: str | None
    end: bool = True  # the last piece: carries the token totals and model

    @property
    def value(self) -> Any:
        return self.text if self.text is not None else self.object

    @property
    def usage(self) -> Usage:
        return Usage.of(self)


class PromptClient:
    def __init__(self, requester: Requester) -> None:
        self.requester = requester

    async def stream(self, id: str, variables: dict[str, Any], streaming: bool = True,
                     model: str | None = None, sampling: dict[str, Any] | None = None
                     ) -> AsyncGenerator[PromptResult, None]:
        """Run template ``id``, yielding its text as it arrives (the pieces already
        waiting joined into one), then one ``end`` piece with no text, the token
        totals, and the parsed ``object`` of a json/jsonl template.

        The requester reads ahead into its own bounded buffer only, so a caller that
        falls behind holds the prompt service back. Closing this generator (a cancel,
        a break) cancels the prompt request and its LLM stream at once. A service
        error raises ``ServiceError``. ``streaming`` false asks the service for one
        record (the same pieces, the text as one). ``model``: answer with that model
        of the configured provider instead of its own; ``sampling``: the caller's
        ``max_tokens``, ``temperature``, ``stop`` (``Sampling.sampling()``)."""
        request = PromptRequest(id=id, variables=variables, streaming=streaming,
                                model=model, **(sampling or {}))
        async with aclosing(self.requester.frames(request)) as frames:
            async for batch in frames:
                texts: list[str] = []  # a batch is never empty: ``last`` is set
                for data, _ in batch:
                    last = decode(PromptResponse, data)
                    if last.error is not None:
                        break
                    if last.text:
                        texts.append(last.text)
                if texts:
                    yield PromptResult("".join(texts), None, None, None, None, end=False)
                if last.error is not None:
                    raise ServiceError(last.error)
                if last.end_of_stream:
                    value = json.loads(last.object) if last.object is not None else None
                    yield PromptResult("" if value is None else None, value, last.in_token,
                                       last.out_token, last.model)

    async def invoke(self, id: str, variables: dict[str, Any], model: str | None = None,
                     sampling: dict[str, Any] | None = None) -> PromptResult:
        """The stream collected: the whole text (or object) with the totals."""
        parts: list[str] = []
        async with aclosing(self.stream(id, variables, streaming=False, model=model,
                                        sampling=sampling)) as pieces:
            async for piece in pieces:
                if not piece.end:
                    parts.append(piece.text or "")
                elif piece.object is not None:
                    return piece
                else:
                    piece.text = "".join(parts)
                    return piece
        raise RuntimeError(f"prompt {id!r} ended without a final record")

    async def prompt(self, id: str, variables: dict[str, Any]) -> Any:
        """The text of a text template, or the parsed object of a json/jsonl one."""
        return (await self.invoke(id, variables)).value
