"""The gateway's part of a question's trace (docs/observability.md): where it
starts, what it says about the request, and how the client learns its id.

* ``http_scope``: a span for each request to a route that asks something (every
  method but GET), current in its handler's task, the child of the client's own
  ``traceparent`` when it sends one (whose sampled flag then decides, not
  TG_TRACE_SAMPLE); a kept trace's ``traceparent`` goes back as a response header
  (``stamp`` for a response the handler returns, ``on_prepare`` for one it
  streams). The websocket opens its own per request (websocket.py), the child of
  the frame's ``traceparent``.
* ``Watch``: the dispatcher's note of who asked what (service, flow, user,
  collection) on the request's span, and when the answer's first record, its
  sources and its first token passed the gateway, each timed once: after the
  first token nothing of this runs.
"""
import time
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from trustgraph import tracing
from trustgraph.schema import Record, Response

from .caller import Caller

names = tracing.names
GATEWAY = "gateway"  # the gateway's spans' service name
TRACEPARENT = tracing.TRACEPARENT


def http_scope(method: str, path: str, headers: Mapping[str, str]) -> tracing.Scope | None:
    """The request's span: a child of the client's ``traceparent``, if it sent one
    (its sampled flag then decides whether the question is traced)."""
    if method == "GET":  # reads (pages, metrics, traces themselves) start no trace
        return None
    attributes: dict[str, Any] = {names.HTTP_METHOD: method, names.HTTP_ROUTE: path,
                                  names.TRANSPORT: path}
    return tracing.open_scope(tracing.tracer(GATEWAY), f"{method} {path}", tracing.SERVER,
                              parent=tracing.from_client(headers, attributes),
                              attributes=attributes)


def stamp(response: web.StreamResponse, scope: tracing.Scope | None) -> None:
    """The request's ``traceparent`` on a response not yet sent, and its status on
    the span."""
    if scope is None:
        return
    scope.span.set_attribute(names.HTTP_STATUS, response.status)
    if not response.prepared and TRACEPARENT not in response.headers \
            and tracing.kept_trace_id(scope) is not None:
        if header := tracing.traceparent(scope.span):
            response.headers[TRACEPARENT] = header


async def on_prepare(request: web.Request, response: web.StreamResponse) -> None:
    """A streamed response's headers go out inside its handler, where its span is
    current: the ``traceparent`` of a kept trace goes with them."""
    if TRACEPARENT not in response.headers and tracing.current_span() is not None:
        tracing.inject(response.headers)  # type: ignore[arg-type]


# Batches watched for the first token at most: a service whose records the check
# below does not recognise still costs nothing after these.
WATCHED = 64


def _token_key(model: type[Response]) -> bytes | None:
    """What a record carrying streamed text holds: its delta field with a string."""
    return None if model.delta_field is None else b'"%s":"' % model.delta_field.encode()


class Watch:
    """One answer's way through the gateway, on the current span."""

    __slots__ = ("span", "started", "key", "sources", "left")

    def __init__(self, span: Any, model: type[Response]) -> None:
        self.span = span
        self.started = time.perf_counter()
        self.key = _token_key(model)
        self.sources = False  # seen
        self.left = WATCHED

    @classmethod
    def of(cls, service: str, flow: str, caller: Caller, record: Record,
           model: type[Response]) -> "Watch | None":
        """Who asked what, on the current span; None when nothing is traced."""
        span = tracing.current_span()
        if span is None:
            return None
        span.set_attributes({names.SERVICE: service, names.FLOW: flow,
                             names.USER: caller.user, "tg.role": caller.role or ""})
        tracing.describe(span, record)  # the collection asked about
        if isinstance(query := getattr(record, "query", None) or
                      getattr(record, "question", None), str):
            span.set_attribute(names.INPUT, names.bounded(query))
        return cls(span, model)

    def seen(self, batch: list[tuple[bytes, bool]], first: bool) -> "Watch | None":
        """A batch passed: its times noted; None once the first token was (or the
        answer is over), so that the next batches cost nothing here."""
        if first:
            self._mark(names.FIRST_RESPONSE_MS)
        for data, final in batch:
            if not self.sources and b'"sources":' in data:
                self.sources = True
                self._mark(names.SOURCES_MS)
            if final:
                return None
            if self.key is not None and (at := data.find(self.key)) >= 0 and \
                    data[at + len(self.key):at + len(self.key) + 1] != b'"':
                self._mark(names.FIRST_TOKEN_MS)
                return None
        self.left -= 1
        return self if self.left else None

    def _mark(self, name: str) -> None:
        self.span.set_attribute(name, round((time.perf_counter() - self.started) * 1000, 3))
