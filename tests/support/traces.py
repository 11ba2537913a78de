"""Tracing switched on in the test's own process (``traced``), its spans kept in a
trace store of their own, read back as the gateway reads them."""
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.waiting import eventually
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

    async def latest_explanation(self, service: str) -> dict[str, Any]:
        """The newest explanation ``service`` wrote, once written (a service's span
        ends, and so is written, just after its answer's last record went out)."""
        def found() -> dict[str, Any] | None:
            tracing.flush()
            for listed in self.reader.explanations(5):
                if listed["service"] == service:
                    return self.reader.explanation(listed["trace_id"])
            return None
        return await eventually(found, f"an explanation from {service}")

    async def settled(self, trace_id: str, names: set[str]) -> dict[str, Any]:
        """The trace once it holds a SERVER span of each of ``names``."""
        def found() -> dict[str, Any] | None:
            tracing.flush()
            trace = self.reader.trace(trace_id)
            served = {s["name"] for s in trace["spans"] if s["kind"] == "SERVER"} \
                if trace else set()
            return trace if names <= served else None
        return await eventually(found, f"spans of {sorted(names)} in trace {trace_id}")


@contextmanager
def traced(directory: Path, sample: float = 1.0) -> Iterator[Traces]:
    """Processors, runners and gateways made inside this block are traced."""
    path = directory / tracing.STORE_FILE
    tracing.configure("tests", True, sample, path, 50_000_000)
    try:
        yield Traces(path)
    finally:
        tracing.shutdown()


@contextmanager
def asking(name: str = "test question") -> Iterator[str]:
    """A span current around what the block asks, as a traced client's would be (a
    call outside any trace is not traced: housekeeping); yields its trace id."""
    scope = tracing.open_scope(tracing.tracer("tests"), name, tracing.SERVER)
    assert scope is not None, "traced() first"
    try:
        yield tracing.trace_id(scope.span)
    finally:
        scope.close()


def by_name(spans: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        found.setdefault(span["name"], []).append(span)
    return found


def children(spans: list[dict[str, Any]], parent: dict[str, Any]) -> list[dict[str, Any]]:
    return [span for span in spans if span["parent_id"] == parent["span_id"]]
