"""Tracing switched on for one process: ``configure`` once, at start-up, then
``tracer(name)`` for each processor the process serves.

Each processor gets a tracer provider of its own (its name is the spans'
``service.name``, so a backend shows ``graph-rag`` and ``prompt`` apart though one
process group serves both), all sharing the process's batch span processors: spans
are queued as they end and written by each one's thread every ``EXPORT_DELAY_MS``,
to the trace store in the data dir (``store.py``) and, when
``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set,
to that OTLP collector (http/protobuf; the exporter reads OpenTelemetry's own
``OTEL_EXPORTER_OTLP_*`` variables). One processor each, so that a collector that
is down (its exporter retrying for seconds) never holds up the store. Nothing is
set globally: code outside this project sees no provider.

Not configured (tests that build processors in-process, ``TG_TRACING=false``),
``tracer`` answers None and every span helper does nothing.
"""
import atexit
import logging
import os
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import Tracer

from . import names
from .logs import TraceIdFilter

log = logging.getLogger(__name__)

OTLP_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
STORE_FILE = "traces.db"  # in the data dir
# How often the span processor's thread writes what ended: soon enough that a
# question's trace can be read right after its answer, seldom enough to batch.
EXPORT_DELAY_MS = 500
QUEUE_SIZE = 16_384  # spans waiting to be written; past it new ones are dropped


class Tracing:
    """One process's tracing: the shared span processor and a provider per name."""

    def __init__(self, process: str, exporters: list[SpanExporter], sample: float) -> None:
        self.process = process
        self.processors = [BatchSpanProcessor(exporter, max_queue_size=QUEUE_SIZE,
                                              schedule_delay_millis=EXPORT_DELAY_MS)
                           for exporter in exporters]
        # The gateway decides for a question; every service after it follows the
        # traceparent's sampled flag, so a trace is kept whole or not at all.
        self.sampler = ParentBased(TraceIdRatioBased(sample))
        self._tracers: dict[str, Tracer] = {}

    def tracer(self, name: str) -> Tracer:
        if name not in self._tracers:
            provider = TracerProvider(sampler=self.sampler, shutdown_on_exit=False,
                                      resource=Resource.create({
                                          "service.name": name,
                                          "service.instance.id": f"{self.process}-{os.getpid()}",
                                          "process.pid": os.getpid(),
                                          names.PROCESS: self.process}))
            for processor in self.processors:
                provider.add_span_processor(processor)
            self._tracers[name] = provider.get_tracer("trustgraph")
        return self._tracers[name]

    def flush(self) -> None:
        for processor in self.processors:
            processor.force_flush()

    def shutdown(self) -> None:
        for processor in self.processors:  # each writes what is queued, then stops
            processor.shutdown()


_tracing: Tracing | None = None


def configure(process: str, enabled: bool = True, sample: float = 1.0,
              store: Path | None = None, store_bytes: int = 0) -> Tracing | None:
    """Trace this process (``process``: what tg-start calls it): spans kept in the
    SQLite file ``store`` (at most ``store_bytes``, oldest traces dropped; None or
    0: none kept) and sent to the OTLP collector the environment names, if any; a
    share ``sample`` of traces kept. Not ``enabled``, or with nowhere to send spans:
    no tracing (None). Called again, the previous configuration is shut first."""
    global _tracing
    shutdown()
    exporters: list[SpanExporter] = []
    if enabled and store is not None and store_bytes > 0:
        from .exporter import StoreExporter
        exporters.append(StoreExporter(store, store_bytes))
    if enabled and any(os.environ.get(variable) for variable in OTLP_VARIABLES):
        exporters.append(_otlp())
    if not exporters:
        return None
    _tracing = Tracing(process, exporters, sample)
    TraceIdFilter.install()
    atexit.register(shutdown)
    return _tracing


def _otlp() -> SpanExporter:
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                              os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"))
    if protocol != "http/protobuf":
        log.warning("OTEL_EXPORTER_OTLP_PROTOCOL=%s: spans are sent as http/protobuf, the "
                    "one protocol supported (collectors take it on port 4318)", protocol)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    return OTLPSpanExporter()


def tracer(name: str) -> Tracer | None:
    """The tracer of processor ``name`` (its spans' ``service.name``); None when
    this process is not traced."""
    return _tracing.tracer(name) if _tracing is not None else None


def current() -> Tracing | None:
    return _tracing


def flush() -> None:
    """Write the spans ended so far now, rather than within ``EXPORT_DELAY_MS``."""
    if _tracing is not None:
        _tracing.flush()


def shutdown() -> None:
    """Write the spans still queued and stop tracing (at exit; a test's teardown)."""
    global _tracing
    if _tracing is not None:
        tracing, _tracing = _tracing, None
        tracing.shutdown()
        TraceIdFilter.remove()
