"""What a handler gives, read as one stream of records and deltas (``Items``): the
record it returns, or what it yields, each ``Relay``'s sub-stream read in its place.
The contract itself is told in ``service.py``."""
import inspect
from collections.abc import AsyncIterator, Awaitable
from typing import Generic, TypeVar, Union

from ..schema import Response
from .relay import Delta

Resp = TypeVar("Resp", bound=Response)
Resp_co = TypeVar("Resp_co", bound=Response, covariant=True)


class Relay(Generic[Resp_co]):
    """A sub-stream handed to the runner: a handler that yields (or returns)
    ``Relay(stream)`` has ``stream``'s items read in its place, as ``yield from``
    would, but with no generator of the handler's own resumed per item: a service
    passing another's answer on (``relay``, ``PromptClient.stream``) costs nothing
    per token. ``stream`` yields what a handler may yield, nested ``Relay``s included.

    Errors are ``yield from``'s: an exception raised in ``stream`` is thrown into the
    generator that yielded the ``Relay``, at that ``yield``, so a ``try`` or ``with
    step(...)`` around it sees it (``retrieval/answer.py`` names the failed step so);
    unhandled there, it goes on outward. A ``Relay`` returned rather than yielded has
    no generator to go back to: its errors end the request. Closing is innermost
    first: a cancelled request closes ``stream`` (and its LLM stream), then the
    generators around it."""

    __slots__ = ("stream",)

    def __init__(self, stream: AsyncIterator["Yielded[Resp_co]"]) -> None:
        self.stream = stream


# What a handler yields, and what a stream it relays yields.
Yielded = Union[Resp, Delta, Relay[Resp]]

class Items(Generic[Resp]):
    """What a handler gave, as one stream of records and deltas: the record it
    returned, or what it yields, each ``Relay``'s stream read in its place (an
    exception one raises is thrown back into the generator that yielded it, as
    ``yield from`` does). Anything else is a ``TypeError``. ``aclose`` closes every
    generator open in it, innermost first."""

    __slots__ = ("_result", "_open")

    def __init__(self, result: Awaitable[Resp | Relay[Resp]] | AsyncIterator[Yielded[Resp]]
                 ) -> None:
        self._result: Awaitable[Resp | Relay[Resp]] | AsyncIterator[Yielded[Resp]] | None \
            = result
        self._open: list[AsyncIterator[Yielded[Resp]]] = []  # the one reading now is last

    def __aiter__(self) -> "Items[Resp]":
        return self

    async def __anext__(self) -> Resp | Delta:
        if self._result is not None:  # the first item
            result, self._result = self._result, None
            if inspect.isawaitable(result):
                returned = await result
                if isinstance(returned, Response):
                    return returned
                if not isinstance(returned, Relay):
                    raise _unmarked(returned, "returned")
                result = returned.stream
            self._open.append(result)
        thrown: Exception | None = None
        while self._open:
            reading = self._open[-1]
            try:
                if thrown is None:
                    item = await anext(reading)
                else:  # what the sub-stream it yielded raised, raised where it yielded
                    item = await reading.athrow(thrown)  # type: ignore[attr-defined]
            except StopAsyncIteration:
                self._open.pop()
                thrown = None
                continue
            except Exception as error:
                self._open.pop()
                if not self._open:
                    raise
                thrown = error
                continue
            if isinstance(item, Delta | Response):
                return item  # the common case first
            if not isinstance(item, Relay):
                raise _unmarked(item, "yielded")
            self._take(item.stream)
            thrown = None
        raise StopAsyncIteration

    def _take(self, stream: AsyncIterator[Yielded[Resp]]) -> None:
        """A relayed stream, read from now on. An ``Items`` already started (a
        handler that read the first item of its own sub-streams, as the agent's
        dialog does) hands over its open generators, so no second reader stands
        between this one and a token."""
        if isinstance(stream, Items) and stream._result is None:
            self._open += stream._open
            stream._open = []
        else:
            self._open.append(stream)

    async def aclose(self) -> None:
        if inspect.iscoroutine(self._result):  # never started
            self._result.close()
        elif isinstance(self._result, AsyncIterator):
            self._open.append(self._result)
        self._result = None
        while self._open:
            reading = self._open.pop()
            close = getattr(reading, "aclose", None)
            if close is not None:
                await close()


def _unmarked(item: object, how: str) -> TypeError:
    kind = "an async iterator" if isinstance(item, AsyncIterator) else type(item).__name__
    return TypeError(f"a handler {how} {kind}: it may give a response record, a Delta, "
                     f"or Relay(stream) for a sub-stream read in its place")
