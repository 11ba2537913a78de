"""How the ecosystem's protocols (the OpenAI-compatible API, the MCP server) ask
services: the one place they reach the core's client, so the caller goes with every
request they make.

Whose data a request reads and writes comes from the caller's credential, never from
the request body (DESIGN §6): ``tenant(caller)`` fills each request's ``user``. Today
a key names nobody (one gateway token, or none), so requests keep the services'
default user; when keys name a user and a role, ``tenant`` returns that user and the
client checks the role against the service here, in ``ask``.
"""
import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from trustgraph.base import ServiceError
from trustgraph.schema import Error

from ..core import Caller, Dispatcher, Frame


def tenant(caller: Caller) -> str | None:
    """The user whose data ``caller`` works on (None: the services' default)."""
    return None


def ask(client: Dispatcher, caller: Caller, service: str, flow: str,
        request: dict[str, Any], request_id: str | None = None
        ) -> AsyncGenerator[list[Frame], None]:
    """``service``'s answer to ``request`` on behalf of ``caller``: batches of
    response frames, as ``Dispatcher.frames``; closing them cancels the request. A
    bad request, an unknown flow or a service turned off raise here, before any
    frame."""
    row = client.resolve(service, flow)
    record = client.prepare(row, request, tenant=tenant(caller), where="")
    return client.frames(row, flow, record, request_id)


async def answer(client: Dispatcher, caller: Caller, service: str, flow: str,
                 request: dict[str, Any]) -> dict[str, Any]:
    """The final record of a service that answers once, decoded; its error raised
    (``ServiceError``)."""
    final: dict[str, Any] = {}
    async with aclosing(ask(client, caller, service, flow, request)) as batches:
        async for batch in batches:
            final = json.loads(batch[-1][0])
    failure(final)
    return final


def failure(record: dict[str, Any]) -> None:
    """Raise a record's error, if it carries one."""
    if record.get("error"):
        raise ServiceError(Error.model_validate(record["error"]))
