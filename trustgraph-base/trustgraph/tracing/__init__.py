"""One trace per question and per loaded document, across every process and the
broker (OpenTelemetry; docs/observability.md): ``setup`` (a process's tracing),
``spans`` (each hop's span and the W3C context in message properties), ``names``
(the attributes spans carry), the trace store (``store``, ``exporter``,
``reading``) and the trace id on log lines (``logs``)."""
from opentelemetry.context import Context

from . import names
from .setup import STORE_FILE, configure, current, flush, shutdown, tracer
from .spans import (
    CLIENT,
    CONSUMER,
    SERVER,
    TRACEPARENT,
    Scope,
    current_span,
    current_trace_id,
    current_tracer,
    describe,
    end,
    extract,
    failed,
    from_client,
    inject,
    kept_trace_id,
    note,
    open_scope,
    start_client,
    trace_id,
    traceparent,
)

__all__ = [
    "CLIENT", "CONSUMER", "SERVER", "STORE_FILE", "TRACEPARENT", "Context", "Scope",
    "configure", "current", "current_span", "current_trace_id", "current_tracer", "describe",
    "end", "extract", "failed", "flush", "from_client", "inject", "kept_trace_id", "names",
    "note", "open_scope", "shutdown", "start_client", "trace_id", "traceparent", "tracer",
]
