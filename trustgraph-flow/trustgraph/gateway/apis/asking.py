"""How the APIs ask services and read their answers: by name, with a request as a
client sent it, always for the caller; an answer read once, as events
(``trustgraph.answers.Reader``), which each API renders its own way.

Whose data a request reads and writes comes from the caller's credential, never from
the request body (DESIGN §6): the core's client fills each request's ``user`` from
the caller and checks the caller's role against the service (``core/access.py``).
"""
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from typing import Any

from pydantic_core import from_json

from trustgraph.answers import Event, Failed, Reader
from trustgraph.base import ServiceError
from trustgraph.schema import Error

from ..core import Caller, Dispatcher, Frame
from .collected import Collected

Render = Callable[[list[Event]], bytes]  # a batch of events as the bytes an API sends


def ask(client: Dispatcher, caller: Caller, service: str, flow: str,
        request: dict[str, Any], request_id: str | None = None, text_only: bool = False
        ) -> tuple[AsyncGenerator[list[Frame], None], Reader]:
    """``service``'s answer to ``request`` on behalf of ``caller``: its batches of
    frames, to be read as events (``read``, ``rendered``) by the reader given, which
    knows its response model (``reader.model``); closing them cancels the request.
    ``text_only``: the API shows only the text, so an answer whose text failed is a
    failure (``Reader``). A bad request, an unknown flow or a service turned off
    raise here, before any frame."""
    row = client.resolve(service, flow)
    record = client.prepare(row, request, where="")
    frames = client.frames(row, flow, record, request_id, caller=caller)
    return frames, Reader(row.response_model, text_only)


def events_of(batch: list[Frame], reader: Reader) -> tuple[list[Event], Error | None]:
    """A batch of an answer's frames as its events (one decode per record), and the
    service's error if it ended with one (after the events that came before it in the
    batch: deltas waiting while the gateway was busy)."""
    events: list[Event] = []
    for data, final in batch:
        events += reader.read(from_json(data), final)
    if events and type(last := events[-1]) is Failed:
        return events[:-1], last.error
    return events, None


async def read(frames: AsyncGenerator[list[Frame], None], reader: Reader
               ) -> AsyncGenerator[list[Event], None]:
    """An answer's batches of frames as batches of events; the service's error raises
    ``ServiceError`` after the events before it. Closing this closes ``frames``, which
    cancels the request."""
    async with aclosing(frames) as batches:
        async for batch in batches:
            events, error = events_of(batch, reader)
            if events:
                yield events
            if error is not None:
                raise ServiceError(error)


async def rendered(frames: AsyncGenerator[list[Frame], None], reader: Reader,
                   render: Render) -> AsyncGenerator[list[Frame], None]:
    """As ``read``, each batch of events rendered into one frame of what an API sends
    (one pass per batch: the token path); a batch that renders to nothing (progress
    an API does not show) sends nothing."""
    async with aclosing(frames) as batches:
        async for batch in batches:
            events, error = events_of(batch, reader)
            if events and (data := render(events)):
                yield [(data, False)]
            if error is not None:
                raise ServiceError(error)


async def collected(answer: AsyncGenerator[list[Event], None],
                    told: Callable[[list[Event]], Awaitable[None]] | None = None
                    ) -> Collected:
    """The whole answer; ``told`` sees each batch of events as it comes (an MCP tool
    tells the host how it is getting on)."""
    whole = Collected()
    async with aclosing(answer) as batches:
        async for events in batches:
            whole.add(events)
            if told is not None:
                await told(events)
    return whole


async def answer(client: Dispatcher, caller: Caller, service: str, flow: str,
                 request: dict[str, Any]) -> dict[str, Any]:
    """The final record of a service that answers once and is no answer stream (the
    librarian, the stores), decoded; its error raised (``ServiceError``)."""
    row = client.resolve(service, flow)
    record = client.prepare(row, request, where="")
    return await client.final(row, flow, record, caller=caller)
