"""Calling the prompt service: a template id and its variables in, text or a parsed
JSON object out, with the text streamed to a callback as it arrives.

    prompts = PromptClient(await ctx.clients.get("prompt"))
    answer = await prompts.kg_prompt(query, triples, streaming=True, chunk_callback=send)
"""
import json
from collections.abc import Awaitable, Callable, Iterable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from ..schema import PromptRequest, PromptResponse, decode
from .requester import Requester, ServiceError

ChunkCallback = Callable[[str], Awaitable[None]]


@dataclass
class PromptResult:
    text: str | None  # text templates
    object: Any  # json/jsonl templates: the parsed answer
    in_token: int | None
    out_token: int | None
    model: str | None

    @property
    def value(self) -> Any:
        return self.text if self.text is not None else self.object


def kg_variables(query: str, kg: Iterable[tuple[str, str, str]]) -> dict[str, Any]:
    """The variables of ``kg-prompt``: statements as ``{"s", "p", "o"}``."""
    return {"query": query, "knowledge": [{"s": s, "p": p, "o": o} for s, p, o in kg]}


def document_variables(query: str, documents: Iterable[str]) -> dict[str, Any]:
    """The variables of ``document-prompt``."""
    return {"query": query, "documents": list(documents)}


class PromptClient:
    def __init__(self, requester: Requester) -> None:
        self.requester = requester

    async def invoke(self, id: str, variables: dict[str, Any], streaming: bool = False,
                     chunk_callback: ChunkCallback | None = None) -> PromptResult:
        """Run template ``id``; when streaming, ``chunk_callback`` is awaited with the
        text in order (pieces already waiting are passed as one) before more is read.
        A service error raises ``ServiceError``."""
        request = PromptRequest(id=id, variables=variables, streaming=streaming)
        parts: list[str] = []
        last = None
        # Closed here and now if the caller is cancelled (even inside the callback),
        # so the cancel reaches the prompt service and its LLM stream at once.
        async with aclosing(self.requester.frames(request)) as frames:
            async for batch in frames:
                texts = []
                for data, _ in batch:
                    last = decode(PromptResponse, data)
                    if last.error is not None:
                        break
                    if last.text:
                        texts.append(last.text)
                parts.extend(texts)
                if texts and streaming and chunk_callback is not None:
                    await chunk_callback("".join(texts))
                if last.error is not None:
                    raise ServiceError(last.error)
        if last.object is not None:
            return PromptResult(None, json.loads(last.object), last.in_token,
                                last.out_token, last.model)
        return PromptResult("".join(parts), None, last.in_token, last.out_token, last.model)

    async def prompt(self, id: str, variables: dict[str, Any], streaming: bool = False,
                     chunk_callback: ChunkCallback | None = None) -> Any:
        """The text of a text template, or the parsed object of a json/jsonl one."""
        return (await self.invoke(id, variables, streaming, chunk_callback)).value

    async def kg_prompt(self, query: str, kg: Iterable[tuple[str, str, str]],
                        streaming: bool = False,
                        chunk_callback: ChunkCallback | None = None) -> str:
        return await self.prompt("kg-prompt", kg_variables(query, kg), streaming,
                                 chunk_callback)

    async def document_prompt(self, query: str, documents: Iterable[str],
                              streaming: bool = False,
                              chunk_callback: ChunkCallback | None = None) -> str:
        return await self.prompt("document-prompt", document_variables(query, documents),
                                 streaming, chunk_callback)
