"""What the client's requests carry and how a one-answer reply is read: the scope
and optional fields (left out when not given, so that the gateway and services use
their defaults), bytes as base64, terms and records as the plain JSON the wire
carries; ``final_response`` the reply of a service that answers once.
"""
import base64
import secrets
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

Term = dict[str, str]  # {"t": "i", "i": iri} or {"t": "l", "v": value}

TRACEPARENT = "traceparent"  # the W3C trace context's header and frame field


def traceparent() -> str:
    """A new W3C ``traceparent`` with the sampled flag: the gateway keeps the trace of
    a request that carries one, whatever share it keeps of its own accord."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


async def final_response(responses: AsyncGenerator[dict[str, Any], None]) -> dict[str, Any]:
    """The last (complete) response of a service that answers once."""
    last: dict[str, Any] = {}
    async with aclosing(responses):
        async for last in responses:  # noqa: B007 (only the last is kept)
            pass
    return last


def scope(user: str | None, collection: str | None) -> dict[str, str]:
    """The request's ``user`` / ``collection``, leaving out those not given (the
    gateway and services then use their defaults)."""
    return {key: value for key, value in (("user", user), ("collection", collection))
            if value is not None}


def given(**fields: Any) -> dict[str, Any]:
    """The fields that were given: ``None`` leaves the service's default."""
    return {key: value for key, value in fields.items() if value is not None}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def term(value: str | Term) -> Term:
    return {"t": "i", "i": value} if isinstance(value, str) else value


def plain(value: Any) -> Any:
    """A record (``Triple``) as the plain JSON value the wire carries."""
    dump = getattr(value, "model_dump", None)
    return dump(exclude_none=True) if dump is not None else value
