"""What a text-completion provider is: one async generator of text deltas that ends
with the request's ``Usage``. Non-streaming callers collect it."""
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from trustgraph.base import HandledError


@dataclass(frozen=True)
class Usage:
    in_token: int | None
    out_token: int | None
    model: str


class LlmError(HandledError):
    def __init__(self, message: str) -> None:
        super().__init__("llm-error", message)


class Provider(Protocol):
    def stream(self, system: str, prompt: str) -> AsyncIterator[str | Usage]: ...


NOT_CONFIGURED = (
    "no LLM is configured. Set TG_LLM=openai with OPENAI_API_KEY, or OPENAI_BASE_URL "
    "for an OpenAI-compatible server (vLLM, LM Studio, Ollama's /v1, llamafile), "
    "then restart (tg-start, or tg-run text-completion)")


class NotConfigured:
    """Stands in when no provider is configured, so the stack still starts and every
    request is told how to configure one."""

    async def stream(self, system: str, prompt: str) -> AsyncIterator[str | Usage]:
        raise LlmError(NOT_CONFIGURED)
        yield  # makes this an async generator
