"""The one generic requestor: every service row goes through it.

It resolves a service name and flow to a table row, validates the request against
the row's model, sends it on the bus under a fresh request id (clients choose their
own ids, which may collide across sockets) and yields the response frames,
coalesced when the caller has fallen behind.
"""
import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import aclosing
from dataclasses import replace

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from trustgraph.base import TIMING, Requester, ServiceError
from trustgraph.pubsub import Bus
from trustgraph.pubsub.pulsar_shim import MAX_RECORD_BYTES
from trustgraph.schema import Record, encode

from .errors import GatewayError, bad_request, too_large, validation_message
from .framing import Frame
from .services import SERVICES, ServiceRow

__all__ = ["MAX_RECORD_BYTES", "Dispatcher"]  # the largest request record (a frame's limit)


class Dispatcher:
    def __init__(self, bus: Bus, flows: Iterable[str], timeout: float,
                 off: Iterable[str] = ()) -> None:
        self.flows = tuple(flows)
        self.off = frozenset(off)  # optional services turned off in the gateway's settings
        self._bus = bus
        self._timeout = timeout
        self._owner = f"gateway-{uuid.uuid4().hex[:8]}"
        self._requesters: dict[tuple[str, str], asyncio.Future[Requester]] = {}

    def resolve(self, service: object, flow: object) -> ServiceRow:
        """The row for ``service``; the flow must be one this gateway routes, unless
        the service is outside flows (config), which ignores it."""
        row = SERVICES.get(service) if isinstance(service, str) else None
        if row is None:
            raise GatewayError("unknown-service", f"unknown service {service!r}; known: "
                               f"{', '.join(SERVICES)}", 404)
        if row.name in self.off:
            raise GatewayError("disabled", f"{row.name} is turned off on this gateway; "
                               f"{row.optional}", 404)
        if row.global_flow is None and flow not in self.flows:
            raise GatewayError("unknown-flow", f"unknown flow {flow!r}; this gateway serves: "
                               f"{', '.join(self.flows)}", 404)
        return row

    def in_flight(self) -> int:
        """Requests registered in this gateway's requesters and not yet ended (the
        requester's own table, read here only: a test's check that nothing leaks)."""
        started = (future.result() for future in self._requesters.values()
                   if future.done() and not future.cancelled() and not future.exception())
        return sum(requester.in_flight() for requester in started)

    @staticmethod
    def prepare(row: ServiceRow, request: object, tenant: object = None,
                where: str = "request") -> Record:
        """The request record, checked to be sendable; ``tenant`` fills ``user`` when
        the request has none. ``where`` prefixes the field a 400 names."""
        if not isinstance(request, dict):
            raise bad_request(f"{where or 'body'}: must be a JSON object")
        if tenant is not None:
            if not isinstance(tenant, str):
                raise bad_request("user: must be a string")
            if "user" in row.request_model.model_fields and "user" not in request:
                request = {**request, "user": tenant}
        try:
            record = row.request_model.model_validate(request)
        except ValidationError as error:
            raise bad_request(validation_message(error, where)) from None
        _check_sendable(record, request, where)
        return record

    async def frames(self, row: ServiceRow, flow: str, record: Record,
                     request_id: str | None = None) -> AsyncIterator[list[Frame]]:
        """Batches of response frames, ending after the final one. ``request_id`` is
        the id on the bus (and in every processor's log lines), fresh when not given.
        Closing this generator early cancels the request on the bus."""
        requester = await self._requester(row.name, row.bus_flow(flow))
        first, started = True, time.perf_counter()
        try:
            async with aclosing(requester.frames(record, request_id or new_request_id())
                                ) as batches:
                async for batch in batches:
                    if row.observe is not None and batch[-1][1]:
                        row.observe(time.perf_counter() - started, batch[-1][0])
                    yield row.wire(batch, first)
                    first = False
        except ServiceError as error:
            raise absent_as_disabled(row, error) from None

    async def _requester(self, service: str, flow: str) -> Requester:
        """One started ``Requester`` per (service, flow), made on first use; a failed
        start is forgotten so the next request tries again."""
        key = (service, flow)
        if key not in self._requesters:
            requester = Requester(self._bus, service, flow, self._owner,
                                  replace(TIMING, timeout=self._timeout))
            self._requesters[key] = future = asyncio.ensure_future(_started(requester))
            # Its failure is reported to whoever awaits it; with nobody left (all
            # cancelled, or shutting down) it would be logged as never retrieved.
            future.add_done_callback(lambda done: done.cancelled() or done.exception())
        future = self._requesters[key]
        try:
            return await asyncio.shield(future)
        except Exception:
            if self._requesters.get(key) is future:
                del self._requesters[key]
            raise


def _check_sendable(record: Record, request: dict, where: str) -> None:
    """A record the bus can carry, or the 400 / 413 saying why not. Encoding it once
    here (requests are small next to the token streams) finds both: text that is not
    valid Unicode (a lone surrogate passes validation, then cannot be written as
    UTF-8) and a record larger than a broker message."""
    try:
        size = len(encode(record))
    except PydanticSerializationError as error:
        bad_text = lone_surrogate(request)
        if bad_text is None:
            raise bad_request(f"{where or 'body'}: cannot be encoded: {error}"[:300]) from None
        raise bad_request(f"{_path(bad_text, where)}: not valid Unicode text (a lone "
                          f"surrogate such as \\udfff)") from None
    if size > MAX_RECORD_BYTES:
        raise too_large("the request", size, MAX_RECORD_BYTES,
                        "one broker message; upload documents in parts") from None


def lone_surrogate(value: object) -> list[str] | None:
    """The path to the first string (or key) in ``value`` that UTF-8 cannot encode;
    None when there is none. Walked with a stack: the request may nest deeply."""
    stack: list[tuple[object, list[str]]] = [(value, [])]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if not _encodable(item):
                return path
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                if not _encodable(key):
                    return [*path, _shown(key)]
                stack.append((child, [*path, key]))
        elif isinstance(item, list):
            stack.extend((child, [*path, str(i)])
                         for i, child in reversed(list(enumerate(item))))
    return None


def _encodable(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _shown(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode()


def _path(parts: list[str], where: str) -> str:
    return ".".join(part for part in (where, *parts) if part) or "body"


def absent_as_disabled(row: ServiceRow, error: ServiceError) -> Exception:
    """An optional service that no processor serves is as good as turned off: its
    ``no-service`` error becomes the 404 saying how to turn it on."""
    if row.optional is None or error.error.type != "no-service":
        return error
    return GatewayError("disabled", f"{error.error.message}; {row.optional}", 404)


def new_request_id() -> str:
    return uuid.uuid4().hex


async def _started(requester: Requester) -> Requester:
    await requester.start()
    return requester
