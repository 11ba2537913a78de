"""The spans of each hop, and the W3C trace context that joins them across the
broker.

* ``inject`` / ``extract``: the context as message properties (``traceparent``,
  ``tracestate``), on a request, a pipeline record or an HTTP response;
* ``Scope``: a span made current in the task serving one request or record (the
  runner's task, a websocket request's, an HTTP handler's), so that what the
  handler calls and logs is about it; ``open_scope`` starts it, ``Scope.close``
  ends it;
* ``start_client`` / ``end``: the caller's span of a request sent over the bus,
  never made current (it lives in a generator that yields).

The tracer of the processor whose span is current travels in the context too
(``current_tracer``): a request a handler sends is spanned as that processor's.
Every helper takes None for "not traced" and then does nothing.
"""
import time
from collections.abc import Mapping

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import (
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import Attributes, AttributeValue

from . import names, setup

TRACEPARENT = "traceparent"
_W3C = TraceContextTextMapPropagator()
_TRACER = otel_context.create_key("trustgraph-tracer")

SERVER, CLIENT, CONSUMER = SpanKind.SERVER, SpanKind.CLIENT, SpanKind.CONSUMER


def inject(properties: dict[str, str], span: Span | None = None) -> dict[str, str]:
    """``properties`` with the trace context of ``span`` (else the current one)."""
    if setup.current() is not None:
        _W3C.inject(properties, context=None if span is None else
                    trace.set_span_in_context(span))
    return properties


def extract(properties: Mapping[str, str]) -> Context | None:
    """The context ``properties`` (message properties, HTTP headers) carry (an empty
    one, so a root span, when they carry none or a malformed one); None when this
    process is not traced."""
    return _W3C.extract(properties) if setup.current() is not None else None


def from_client(carrier: Mapping[str, str], attributes: dict[str, AttributeValue]
                ) -> Context | None:
    """The trace context a client sent with its request (the ``traceparent`` header,
    or a frame's field): the request's span continues the client's trace, and the
    client's sampled flag decides whether it is kept. ``attributes`` gain the
    client's span id (``names.CLIENT_SPAN``): the trace store keeps this platform's
    spans only, and roots the trace at the request's span."""
    context = extract(carrier)
    if context is not None:
        parent = trace.get_current_span(context).get_span_context()
        if parent.is_valid:
            attributes[names.CLIENT_SPAN] = f"{parent.span_id:016x}"
    return context


def traceparent(span: Span) -> str | None:
    """The W3C ``traceparent`` of ``span`` (an HTTP response header)."""
    return inject({}, span).get(TRACEPARENT)


def trace_id(span: Span) -> str:
    return f"{span.get_span_context().trace_id:032x}"


def kept_trace_id(scope: "Scope | None") -> str | None:
    """The id of the trace ``scope`` records; None when it records nothing (not
    traced, or sampled out): a client is given only ids it can read back."""
    if scope is None or not scope.span.is_recording():
        return None
    return trace_id(scope.span)


def current_tracer() -> Tracer | None:
    """The tracer of the processor whose span is current; else the process's own
    (named as the process is), or None when the process is not traced."""
    tracing = setup.current()
    if tracing is None:
        return None
    found = otel_context.get_value(_TRACER)
    return found if isinstance(found, Tracer) else tracing.tracer(tracing.process)


class Scope:
    """A span current in this task from ``open_scope`` until ``close``."""

    __slots__ = ("span", "_token", "_started")

    def __init__(self, span: Span, token: object) -> None:
        self.span = span
        self._token = token
        self._started = time.perf_counter()

    def mark(self, name: str) -> None:
        """``name`` set to the milliseconds since the span started (a first token)."""
        self.span.set_attribute(name, round((time.perf_counter() - self._started) * 1000, 3))

    def failed(self, error_type: str, message: str) -> None:
        failed(self.span, error_type, message)

    def cancelled(self) -> None:
        self.span.set_attribute(names.CANCELLED, True)

    def close(self) -> None:
        otel_context.detach(self._token)  # type: ignore[arg-type]
        self.span.end()


def open_scope(tracer: Tracer | None, name: str, kind: SpanKind,
               parent: Context | None = None, attributes: Attributes = None
               ) -> Scope | None:
    """Start span ``name`` under ``parent`` (None: the current context) and make it
    current in this task; None when not traced."""
    if tracer is None:
        return None
    span = _unsampled_child(parent) or \
        tracer.start_span(name, context=parent, kind=kind, attributes=attributes)
    context = trace.set_span_in_context(span, parent)
    token = otel_context.attach(otel_context.set_value(_TRACER, tracer, context))
    return Scope(span, token)


def start_client(service: str, flow: str, request_id: str) -> Span | None:
    """The caller's span of a request sent over the bus, under the current span.
    Outside any trace (a processor reading config as it starts, the gateway reading
    its keys) it is a span that records nothing and says so, unsampled, in the
    context it sends: the service then keeps no trace of its own for it."""
    tracer = current_tracer()
    if tracer is None:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return trace.NonRecordingSpan(_UNSAMPLED.generate())
    if (span := _unsampled_child(None)) is not None:
        return span
    return tracer.start_span(service, kind=CLIENT, attributes={
        names.SERVICE: service, names.FLOW: flow, names.REQUEST_ID: request_id})


def _unsampled_child(parent: Context | None) -> Span | None:
    """Under a span of a trace not kept (``parent``, else the current one), the
    child: one that records nothing and passes the same context on. The sampler is
    ParentBased, so the SDK would make no other, but only after ~10 µs of ids and
    sampling; most questions are not kept (TG_TRACE_SAMPLE), on every hop."""
    above = trace.get_current_span(parent)
    context = above.get_span_context()
    if context.is_valid and not context.trace_flags.sampled:
        return above if isinstance(above, trace.NonRecordingSpan) else \
            trace.NonRecordingSpan(context)
    return None


class _Unsampled:
    """Span contexts of no trace: valid ids, the sampled flag off."""

    def __init__(self) -> None:
        self._ids = RandomIdGenerator()

    def generate(self) -> SpanContext:
        return SpanContext(self._ids.generate_trace_id(), self._ids.generate_span_id(),
                           is_remote=False, trace_flags=TraceFlags(TraceFlags.DEFAULT))


_UNSAMPLED = _Unsampled()


def current_span() -> Span | None:
    """The current span, if there is one that records."""
    span = trace.get_current_span()
    return span if span.is_recording() else None


def note(name: str, value: str | bool | int | float) -> None:
    """Set ``name`` on the current span, if there is one that records."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute(name, value)


def current_trace_id() -> str | None:
    """The current span's trace id (32 hex digits), or None when there is none."""
    context = trace.get_current_span().get_span_context()
    return f"{context.trace_id:032x}" if context.is_valid else None


def describe(span: Span, record: object) -> None:
    """Whose request or document it is, read off the record: its ``user`` and
    ``collection``, or those of the document a pipeline record is about."""
    if not span.is_recording():  # a service's span of a request not traced
        return
    document = _field(record, "document") or _field(_field(record, "chunk"), "document")
    if document is not None and isinstance(_field(document, "id"), str):
        span.set_attribute(names.DOCUMENT, document.id)  # type: ignore[attr-defined]
        record = document
    for name, field in ((names.USER, "user"), (names.COLLECTION, "collection")):
        value = _field(record, field)
        if isinstance(value, str) and value:
            span.set_attribute(name, value)


def _field(record: object, name: str) -> object:
    # A record's fields are in its __dict__ (pydantic); getattr of one it lacks
    # raises and catches an AttributeError inside pydantic, microseconds each.
    fields = getattr(record, "__dict__", None)
    return fields.get(name) if isinstance(fields, dict) else getattr(record, name, None)


def failed(span: Span | None, error_type: str, message: str) -> None:
    if span is not None:
        span.set_status(Status(StatusCode.ERROR, f"{error_type}: {message}"[:500]))
        span.set_attribute(names.ERROR_TYPE, error_type)


def end(span: Span | None, error: BaseException | None = None,
        cancelled: bool = False) -> None:
    if span is None:
        return
    if cancelled:
        span.set_attribute(names.CANCELLED, True)
    elif error is not None:
        failed(span, type(error).__name__, str(error))
    span.end()
