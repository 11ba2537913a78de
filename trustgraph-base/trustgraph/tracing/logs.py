"""The trace id on every log line about a request: a line logged while a request's
span is current (its handler, the runner serving it, a stage's handler) ends with
``trace=<32 hex digits>``, after the ``id=`` it already names and what it says (so
whatever reads the lines as they were still reads them), and the lines of every
process a question crossed are found with one search."""
import logging

from opentelemetry import trace


class TraceIdFilter(logging.Filter):
    """Adds its trace id to a record's message when a span is current."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = trace.get_current_span().get_span_context()
        if context.is_valid and not getattr(record, "traced", False):
            record.msg = f"{record.msg} trace={context.trace_id:032x}"
            record.traced = True  # added once, however many handlers see it
        return True

    @classmethod
    def install(cls) -> None:
        """On every handler of the root logger (where every process's lines go)."""
        for handler in logging.getLogger().handlers:
            if not any(isinstance(f, cls) for f in handler.filters):
                handler.addFilter(cls())

    @classmethod
    def remove(cls) -> None:
        for handler in logging.getLogger().handlers:
            for found in [f for f in handler.filters if isinstance(f, cls)]:
                handler.removeFilter(found)
