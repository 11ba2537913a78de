"""The one generic requestor: every service row goes through it.

It resolves a service name and flow to a table row, validates the request against
the row's model, sends it on the bus under a fresh request id (clients choose their
own ids, which may collide across sockets) and yields the response frames,
coalesced when the caller has fallen behind.

Every request to a service, from every transport and API module, passes through
``frames``, given who asks (``Caller``): there, once, the role table decides
whether it may and for which user (``access.authorize``), and the key's limits
whether it may now (``limits.Limiter``).
"""
import asyncio
import json
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable
from contextlib import aclosing
from dataclasses import replace
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from trustgraph.base import TIMING, Requester, ServiceError, coalesce
from trustgraph.pubsub import Bus
from trustgraph.pubsub.pulsar_shim import MAX_RECORD_BYTES
from trustgraph.schema import Error, Record, Response, Usage, encode

from .access import authorize
from .caller import Caller
from .errors import GatewayError, bad_request, too_large, validation_message
from .flows import RunningFlows
from .limits import Limiter, Meter
from .metrics import CALLER_REQUESTS, LLM_TOKENS, REFUSED
from .services import SERVICES, ServiceRow
from .traced import Watch
from .usage import MAX_SERIES, UsageLedger

# A bus record's JSON is already its wire form (snake_case, unset optionals left out),
# so the transports splice those bytes into their frames without decoding them.
Frame = tuple[bytes, bool]  # (record JSON, is the final record)
# Given the seconds a request took and its final record, whatever transport carried it.
Observer = Callable[[float, bytes], None]


class Dispatcher:
    """The core's client: what every transport and every API module asks services
    through. API modules may declare services optional (``optional``: a stack may
    run without them) and watch a service's answers (``observe``)."""

    def __init__(self, bus: Bus, flows: Iterable[str], timeout: float,
                 limiter: Limiter | None = None, ledger: UsageLedger | None = None) -> None:
        self.flows = RunningFlows(list(flows))  # pinned; none: config's, followed
        self.limiter = limiter or Limiter()
        self.ledger = ledger or UsageLedger(MAX_SERIES)  # LLM tokens and their cost
        self.owner = f"gateway-{uuid.uuid4().hex[:8]}"  # names this process on the bus
        self._bus = bus
        self._timeout = timeout
        self._requesters: dict[tuple[str, str], asyncio.Future[Requester]] = {}
        self._how: dict[str, str] = {}   # optional services: how to turn each on
        self._off: set[str] = set()      # optional services turned off in the settings
        self._observers: dict[str, Observer] = {}

    async def start(self, wait: float) -> None:
        """Read the running flows (waiting ``wait`` seconds for config), and follow them."""
        await self.flows.start(self._bus, self.owner, wait)

    def optional(self, services: Iterable[str], how: str, on: bool = True) -> None:
        """``services`` may be absent from a stack; ``how`` says how to turn them on.
        Turned off here (``on`` false), or with no processor taking their requests,
        each is a 404 ``disabled`` saying so."""
        for service in services:
            self._how[service] = how
            if not on:
                self._off.add(service)

    def observe(self, service: str, observer: Observer) -> None:
        """Call ``observer`` with each answer of ``service``, on every transport."""
        self._observers[service] = observer

    def resolve(self, service: object, flow: object) -> ServiceRow:
        """The row for ``service``; the flow must be running (or pinned), unless the
        service is outside flows (config), which ignores it."""
        row = SERVICES.get(service) if isinstance(service, str) else None
        if row is None:
            raise GatewayError("unknown-service", f"unknown service {service!r}; known: "
                               f"{', '.join(SERVICES)}", 404)
        if row.name in self._off:
            raise GatewayError("disabled", f"{row.name} is turned off on this gateway; "
                               f"{self._how[row.name]}", 404)
        if row.global_flow is None and flow not in self.flows:
            raise GatewayError("unknown-flow", f"unknown flow {flow!r}: it is not running; "
                               f"running: {', '.join(self.flows) or 'none'}", 404)
        return row

    def resolve_global(self, service: object) -> ServiceRow:
        """The row for ``service`` asked outside any flow (``POST /api/v1/{service}``):
        a service of each flow is named there by mistake (404 saying where it is)."""
        row = SERVICES.get(service) if isinstance(service, str) else None
        if row is not None and row.global_flow is None:
            raise GatewayError("unknown-service", f"{row.name} is a service of each flow: "
                               f"POST /api/v1/flow/{{flow}}/service/{row.name}", 404)
        return self.resolve(service, None)

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
                     request_id: str | None = None, *, caller: Caller
                     ) -> AsyncGenerator[list[Frame], None]:
        """Batches of response frames, ending after the final one: the answer to
        ``record`` sent for ``caller``, if the role table lets it (403) and its key's
        limits do now (429). ``request_id`` is the id on the bus (and in every
        processor's log lines), fresh when not given. Closing this generator early
        cancels the request on the bus."""
        record, meter, usage = self._admit(caller, row, record)
        # Who asked what, on the request's span (the transport's), and when its
        # answer's first record, sources and first token passed (then: nothing).
        watch = Watch.of(row.name, flow, caller, record, row.response_model)
        try:
            requester = await self._requester(row.name, row.bus_flow(flow))
            first, started = True, time.perf_counter()
            answer = requester.frames(record, request_id or new_request_id())
            how, observe = self._how.get(row.name), self._observers.get(row.name)
            # Its caller's next request must find the flows as this one left them.
            # (getattr only for a row that has such operations: a field a record lacks
            # is a pydantic AttributeError, microseconds on every request.)
            changes_flows = bool(row.changes_flows) and \
                getattr(record, "operation", None) in row.changes_flows
            async with aclosing(answer) as batches:
                try:
                    async for batch in batches:
                        if observe is not None and batch[-1][1]:
                            observe(time.perf_counter() - started, batch[-1][0])
                        if changes_flows and batch[-1][1]:
                            await self.flows.refresh()
                        if watch is not None:
                            watch = watch.seen(batch, first)
                        shaped = wired(row, batch, first)
                        if usage is not None:
                            count_tokens(shaped, usage)
                        yield shaped
                        first = False
                except ServiceError as error:
                    if how is None or error.error.type != "no-service":
                        raise
                    # An optional service that no processor serves is as good as off.
                    raise GatewayError("disabled", f"{error.error.message}; {how}", 404
                                       ) from None
        finally:
            self._done(caller, flow, meter, usage)

    def _admit(self, caller: Caller, row: ServiceRow, record: Record
               ) -> tuple[Record, Meter | None, Usage | None]:
        """The record as ``caller`` may send it, its key's meter, and the usage to
        count its LLM tokens in (None: the service calls no LLM)."""
        try:
            record, needs = authorize(caller, row, record)
            meter = self.limiter.admit(caller.key_id, caller.limits, needs.llm)
        except GatewayError as refused:
            REFUSED.labels(caller.user, caller.role or "none", refused.type).inc()
            raise
        CALLER_REQUESTS.labels(caller.user, caller.role).inc()
        return record, meter, Usage() if needs.llm else None

    def _done(self, caller: Caller, flow: str, meter: Meter | None,
              usage: Usage | None) -> None:
        tokens_in, tokens_out = (usage.in_token or 0, usage.out_token or 0) if usage \
            else (0, 0)
        self.limiter.release(meter, tokens_in + tokens_out)
        if usage is not None:
            self.ledger.count(caller, flow, usage)
        if tokens_in:
            LLM_TOKENS.labels(caller.user, caller.role, "in").inc(tokens_in)
        if tokens_out:
            LLM_TOKENS.labels(caller.user, caller.role, "out").inc(tokens_out)

    async def final(self, row: ServiceRow, flow: str, record: Record,
                    request_id: str | None = None, *, caller: Caller) -> dict[str, Any]:
        """The one record a service answers once with, asked for ``caller`` (as
        ``frames``), decoded; its error raised."""
        final: dict[str, Any] = {}
        answer = self.frames(row, flow, record, request_id, caller=caller)
        async with aclosing(answer) as batches:
            async for batch in batches:
                final = json.loads(batch[-1][0])
        raise_error(final)
        return final

    async def _requester(self, service: str, flow: str) -> Requester:
        """One started ``Requester`` per (service, flow), made on first use; a failed
        start is forgotten so the next request tries again."""
        key = (service, flow)
        future: asyncio.Future[Requester]
        if key not in self._requesters:
            requester = Requester(self._bus, service, flow, self.owner,
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


def wired(row: ServiceRow, batch: list[Frame], first: bool = False) -> list[Frame]:
    """A batch of ``row``'s bus records as the client gets them: deltas coalesced
    (only when a client has fallen behind do several wait at once), the edges shaped
    by the response model (``first``: this batch opens the response), its hidden
    fields dropped. Only a response model that declares either pays for decoding."""
    model = row.response_model
    batch = coalesce(batch, model)
    if row.reshapes_edges:
        batch = [_edge(data, final, model) if final or (first and i == 0)
                 else (data, final) for i, (data, final) in enumerate(batch)]
    if not model.wire_hidden:
        return batch
    return [(_without(data, model.wire_hidden), final) for data, final in batch]


def _edge(data: bytes, final: bool, model: type[Response]) -> Frame:
    record = json.loads(data)
    shaped = model.wire_edge(record) if isinstance(record, dict) else None
    return (data if shaped is None else _encoded(shaped)), final


def _without(data: bytes, fields: frozenset[str]) -> bytes:
    record = json.loads(data)
    return _encoded({key: value for key, value in record.items() if key not in fields})


def _encoded(record: dict) -> bytes:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()


def count_tokens(batch: list[Frame], usage: Usage) -> None:
    """Add the token counts the batch's records carry (deltas: DESIGN §4). Only a
    record that has one is decoded: most deltas carry none."""
    for data, _ in batch:
        if b'_token"' in data:
            record = json.loads(data)
            if isinstance(record, dict):
                usage.add(Usage.of(record))


def raise_error(record: dict[str, Any]) -> None:
    """Raise a decoded record's error (``ServiceError``), if it carries one."""
    if record.get("error"):
        raise ServiceError(Error.model_validate(record["error"]))


def new_request_id() -> str:
    return uuid.uuid4().hex


async def _started(requester: Requester) -> Requester:
    await requester.start()
    return requester
