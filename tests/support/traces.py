"""Tracing switched on in the test's own process (``traced``), its spans kept in a
trace store of their own, read back as the gateway reads them."""
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trustgraph import tracing
from trustgraph.tracing.reading import TraceReader


class Traces:
    def __init__(self, path: Path) -> None:
        self.reader = TraceReader(path)

    def trace(self, trace_id: str) -> dict[str, Any]:
        """The trace's spans, once every span ended so far is written."""
        tracing.flush()
        found = self.reader.trace(trace_id)
        assert found is not None, f"no trace {trace_id} in the store"
        return found

    def spans(self, trace_id: str) -> list[dict[str, Any]]:
        return self.trace(trace_id)["spans"]


@contextmanager
def traced(directory: Path, sample: float = 1.0) -> Iterator[Traces]:
    """Processors, runners and gateways made inside this block are traced."""
    path = directory / tracing.STORE_FILE
    tracing.configure("tests", True, sample, path, 50_000_000)
    try:
        yield Traces(path)
    finally:
        tracing.shutdown()


def by_name(spans: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        found.setdefault(span["name"], []).append(span)
    return found


def children(spans: list[dict[str, Any]], parent: dict[str, Any]) -> list[dict[str, Any]]:
    return [span for span in spans if span["parent_id"] == parent["span_id"]]
