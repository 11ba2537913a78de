"""How the ecosystem's protocols (the OpenAI-compatible API, the MCP server) ask
services: by name, with a request as a client sent it, always for the caller.

Whose data a request reads and writes comes from the caller's credential, never from
the request body (DESIGN §6): the core's client fills each request's ``user`` from
the caller and checks the caller's role against the service (``core/access.py``).
"""
from collections.abc import AsyncGenerator
from typing import Any

from ..core import Caller, Dispatcher, Frame


def ask(client: Dispatcher, caller: Caller, service: str, flow: str,
        request: dict[str, Any], request_id: str | None = None
        ) -> AsyncGenerator[list[Frame], None]:
    """``service``'s answer to ``request`` on behalf of ``caller``: batches of
    response frames, as ``Dispatcher.frames``; closing them cancels the request. A
    bad request, an unknown flow or a service turned off raise here, before any
    frame."""
    row = client.resolve(service, flow)
    record = client.prepare(row, request, where="")
    return client.frames(row, flow, record, request_id, caller=caller)


async def answer(client: Dispatcher, caller: Caller, service: str, flow: str,
                 request: dict[str, Any]) -> dict[str, Any]:
    """The final record of a service that answers once, decoded; its error raised
    (``ServiceError``)."""
    row = client.resolve(service, flow)
    record = client.prepare(row, request, where="")
    return await client.final(row, flow, record, caller=caller)
