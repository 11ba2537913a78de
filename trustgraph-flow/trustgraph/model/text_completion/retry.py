"""Retry an overloaded provider with backoff, but only before its first token:
after that a retry would repeat text the caller already has, so the error stands.

So the retrying is done once the first piece is in, and the caller reads the rest
from the provider's own generator: nothing of this module runs per token."""
import asyncio
import logging
import random
from collections.abc import AsyncGenerator

from .provider import LlmError, Options, Overloaded, Provider, Usage

log = logging.getLogger(__name__)

Piece = str | Usage


class Retrying:
    """A provider retried while it is overloaded before its first piece;
    ``aclose`` is the inner one's."""

    def __init__(self, provider: Provider, retries: int, base_delay: float = 0.5,
                 max_delay: float = 8.0) -> None:
        self.provider = provider
        self.retries = retries
        self.base_delay = base_delay
        self.max_delay = max_delay

    async def start(self, system: str, prompt: str, options: Options
                    ) -> tuple[Piece | None, AsyncGenerator[Piece, None]]:
        """The provider's first piece (None: it ended without one) of its answer to
        ``prompt`` with ``options``, and its own generator for the rest, which the
        caller must close (``aclosing``: a caller that stops early then closes the
        provider's HTTP stream at once). An ``Overloaded`` from that generator is the
        provider overloaded mid-answer."""
        attempt = 0
        while True:
            pieces = self.provider.stream(system, prompt, options)
            try:
                # An exception out of the first read has already ended the generator.
                return await anext(pieces, None), pieces
            except Overloaded as error:
                if attempt == self.retries:
                    raise LlmError(f"provider still overloaded after {self.retries} "
                                   f"retries: {error.message}") from None
                delay = min(self.max_delay, self.base_delay * 2 ** attempt)
                delay *= random.uniform(0.5, 1.0)
                log.info("provider overloaded (%s); retry %d in %.2f s",
                         error.message, attempt + 1, delay)
                await asyncio.sleep(delay)
                attempt += 1

    async def aclose(self) -> None:
        close = getattr(self.provider, "aclose", None)
        if close is not None:
            await close()
