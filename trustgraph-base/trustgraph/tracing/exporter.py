"""Spans into the trace store (``store.py``): the span processor's thread hands
each batch of ended spans to ``StoreExporter.export``, which writes them in one
transaction."""
import logging
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from . import names
from .store import SpanRow, TraceWriter

log = logging.getLogger(__name__)


class StoreExporter(SpanExporter):
    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        self._writer: TraceWriter | None = None
        self._max_bytes = max_bytes

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            if self._writer is None:  # opened on the span thread, on first use
                self._writer = TraceWriter(self.path, self._max_bytes)
            self._writer.write([row(span) for span in spans])
        except Exception as error:  # a full disk, a locked file: these spans are lost
            log.warning("traces not kept in %s: %s", self.path, error)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True  # every export is written before it returns


def row(span: ReadableSpan) -> SpanRow:
    context, parent = span.context, span.parent
    assert context is not None  # an ended SDK span always has one
    attributes = dict(span.attributes or {})
    explanation = attributes.pop(names.EXPLAIN, None)
    # Which process made it, on the span itself: the store keeps no resources.
    attributes[names.PROCESS] = span.resource.attributes.get(names.PROCESS, "")
    status = span.status
    return SpanRow(
        trace_id=f"{context.trace_id:032x}", span_id=f"{context.span_id:016x}",
        # A request's span continuing a client's trace is the root of the trace kept
        # here: its parent, the client's span, is kept (if anywhere) by the client.
        parent_id=f"{parent.span_id:016x}" if parent is not None
        and names.CLIENT_SPAN not in attributes else None,
        name=span.name, service=str(span.resource.attributes.get("service.name", "")),
        kind=span.kind.name, start_ns=span.start_time or 0,
        end_ns=span.end_time or span.start_time or 0, status=status.status_code.name,
        status_message=status.description, attributes=_plain(attributes),
        events=[{"name": e.name, "time_ns": e.timestamp,
                 "attributes": _plain(dict(e.attributes or {}))} for e in span.events],
        explanation=explanation if isinstance(explanation, str) else None)


def _plain(attributes: dict) -> dict:
    """Attribute values as JSON can hold them (OpenTelemetry keeps sequences as tuples)."""
    return {key: list(value) if isinstance(value, tuple) else value
            for key, value in attributes.items()}
