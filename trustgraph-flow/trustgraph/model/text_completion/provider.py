"""What a text-completion provider is.

A provider is one module ``trustgraph.model.text_completion.<name>.provider`` that
defines ``Settings`` (a subclass of ``LlmSettings`` adding its own variables) and
``make(settings) -> Provider``. A ``Provider`` is one async generator of text deltas
ending with the request's ``Usage``; non-streaming callers collect it. What a request
asks besides its text comes with each call, as ``Options``: an option left unset is
the provider's setting (``chosen``), and nothing about one request is kept on the
provider, which every request shares.

Errors: raise ``Overloaded`` for rate-limit / overload answers (retried with backoff
while nothing has been yielded yet, see ``retry.py``), ``LlmError`` for anything else.
"""
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from trustgraph.base import HandledError, ProcessorSettings
from trustgraph.schema import Usage  # noqa: F401  (what a provider yields last)


class LlmError(HandledError):
    def __init__(self, message: str) -> None:
        super().__init__("llm-error", message)


class Overloaded(LlmError):
    """The provider said to slow down (HTTP 429/529, throttling, overloaded)."""


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Options:
    """What one request asks of the LLM besides its text (a ``TextCompletionRequest``'s
    ``model`` and sampling options). None: the provider's setting (``TG_LLM_MODEL``,
    ``TG_LLM_MAX_TOKENS``, ``TG_LLM_TEMPERATURE``; no stop sequence). A provider whose
    API cannot take one ignores it (docs/providers says which honour which)."""

    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    stop: list[str] | None = None
    # For the next issue, unused until then: the flow's LLM choice (which provider
    # answers, with ``model``: chosen per flow), and a JSON Schema the answer is
    # constrained to (each provider asking its server by the server's own mechanism).
    provider: str | None = None
    schema: dict[str, Any] | None = None


def chosen(asked: T | None, setting: T) -> T:
    """A request's option where it set one, else the provider's setting."""
    return setting if asked is None else asked


class Provider(Protocol):
    def stream(self, system: str, prompt: str, options: Options
               ) -> AsyncGenerator[str | Usage, None]: ...


# A text-completion request holds a slot for its whole stream while this process
# only waits on the provider's socket: I/O-bound, so many at once cost little CPU.
# The provider's HTTP pool is sized well above that, so a stream never queues for
# a connection (aiohttp's default pool of 100 made streams queue in rounds of 100).
IO_BOUND_CONCURRENCY = 512
DEFAULT_CONNECTIONS = 1024


class LlmSettings(ProcessorSettings):
    tg_llm: str = ""  # provider name; empty: openai when its variables are set, else local
    tg_llm_model: str = ""
    tg_llm_temperature: float = 0.0
    tg_llm_max_tokens: int = 4096
    tg_llm_retries: int = 4  # retries of an overloaded provider before the first token
    tg_concurrency: int = IO_BOUND_CONCURRENCY  # streams served at once
    # HTTP connections open to the provider at once (its pool); keep it above
    # TG_CONCURRENCY, or streams past it wait for a connection.
    tg_llm_connections: int = DEFAULT_CONNECTIONS


NOT_CONFIGURED = (
    "no LLM is configured. Set TG_LLM=openai with OPENAI_API_KEY, or OPENAI_BASE_URL "
    "for an OpenAI-compatible server (vLLM, LM Studio, Ollama's /v1, llamafile), or "
    "TG_LLM=<provider> with that provider's variables; then restart (tg-start, or "
    "tg-run text-completion)")


class NotConfigured:
    """Stands in when no provider is configured, so the stack still starts and every
    request is told how to configure one."""

    async def stream(self, system: str, prompt: str, options: Options
                     ) -> AsyncGenerator[str | Usage, None]:
        raise LlmError(NOT_CONFIGURED)
        yield  # makes this an async generator
