"""Retry an overloaded provider with backoff, but only before its first token:
after that a retry would repeat text the caller already has, so the error stands."""
import asyncio
import logging
import random
from collections.abc import AsyncGenerator
from contextlib import aclosing

from .provider import LlmError, Overloaded, Provider, Usage

log = logging.getLogger(__name__)


class Retrying:
    """A provider that retries its inner provider; ``aclose`` is the inner one's."""

    def __init__(self, provider: Provider, retries: int, base_delay: float = 0.5,
                 max_delay: float = 8.0) -> None:
        self.provider = provider
        self.retries = retries
        self.base_delay = base_delay
        self.max_delay = max_delay

    async def stream(self, system: str, prompt: str) -> AsyncGenerator[str | Usage, None]:
        for attempt in range(self.retries + 1):
            started = False
            try:
                # aclosing: a caller that stops early closes the provider's HTTP
                # stream now, not whenever the generator is collected.
                async with aclosing(self.provider.stream(system, prompt)) as pieces:
                    async for piece in pieces:
                        started = True
                        yield piece
                return
            except Overloaded as error:
                if started:
                    raise LlmError(f"provider overloaded mid-answer: {error.message}") from None
                if attempt == self.retries:
                    raise LlmError(f"provider still overloaded after {self.retries} "
                                   f"retries: {error.message}") from None
                delay = min(self.max_delay, self.base_delay * 2 ** attempt)
                delay *= random.uniform(0.5, 1.0)
                log.info("provider overloaded (%s); retry %d in %.2f s",
                         error.message, attempt + 1, delay)
                await asyncio.sleep(delay)

    async def aclose(self) -> None:
        close = getattr(self.provider, "aclose", None)
        if close is not None:
            await close()
