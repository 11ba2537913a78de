"""The trace store (trustgraph/tracing): spans made with the real OpenTelemetry SDK
are written by the store's exporter and read back whole, a trace at a time; the
store keeps to its size by dropping the oldest traces whole; explanations are kept
beside their trace; log lines name the current trace; and an untraced process
does nothing at all."""
import json
import logging

import pytest

from trustgraph import tracing
from trustgraph.tracing.reading import TraceReader
from trustgraph.tracing.store import SpanRow, TraceWriter


@pytest.fixture
def store(tmp_path):
    path = tmp_path / tracing.STORE_FILE
    tracing.configure("tests", True, 1.0, path, 10_000_000)
    yield TraceReader(path)
    tracing.shutdown()


def question(user: str = "alice", explained: bool = False) -> str:
    """A gateway span with a service span under it (made current as the runner
    does, so the second is the first's child); its trace id."""
    gateway = tracing.open_scope(tracing.tracer("gateway"), "websocket graph-rag",
                                 tracing.SERVER, attributes={"tg.user": user})
    assert gateway is not None
    served = tracing.open_scope(tracing.tracer("graph-rag"), "graph-rag", tracing.SERVER)
    assert served is not None
    if explained:
        served.span.set_attributes({"tg.user": user, "tg.collection": "papers",
                                    "input.value": "why?",
                                    "tg.explain": json.dumps({"question": "why?", "kept": 1})})
    served.mark("tg.time_to_first_token_ms")
    served.failed("graph-rag-error", "no graph")
    served.close()
    gateway.close()
    return tracing.trace_id(gateway.span)


def test_a_trace_is_read_back_as_its_spans_parented_and_timed(store):
    trace_id = question()
    tracing.flush()
    [listed] = store.recent()
    assert (listed["trace_id"], listed["root"], listed["user"], listed["spans"],
            listed["errors"]) == (trace_id, "websocket graph-rag", "alice", 2, 1)
    root, child = store.trace(trace_id)["spans"]
    assert (root["service"], root["kind"], root["parent_id"]) == ("gateway", "SERVER", None)
    assert (child["service"], child["parent_id"]) == ("graph-rag", root["span_id"])
    assert child["status"] == "ERROR" and child["attributes"]["error.type"] == \
        "graph-rag-error"
    assert 0 <= child["attributes"]["tg.time_to_first_token_ms"] <= child["duration_ms"]
    assert root["start_ms"] == 0 and child["start_ms"] >= 0


def test_a_user_reads_only_their_own_traces(store):
    mine, theirs = question("alice"), question("bob")
    tracing.flush()
    assert [t["trace_id"] for t in store.recent(user="alice")] == [mine]
    assert store.trace(theirs, user="alice") is None
    assert store.trace(theirs, user="bob") is not None
    assert {t["trace_id"] for t in store.recent()} == {mine, theirs}


def test_an_explanation_is_kept_beside_its_trace_not_in_its_span(store):
    trace_id = question(explained=True)
    question()  # another, unexplained
    tracing.flush()
    [listed] = store.explanations()
    assert (listed["trace_id"], listed["service"], listed["collection"], listed["question"]) \
        == (trace_id, "graph-rag", "papers", "why?")
    assert store.explanation(trace_id)["kept"] == 1
    assert store.explanation(trace_id, user="bob") is None
    assert store.explanations(collection="other") == []
    assert all("tg.explain" not in span["attributes"] for span in store.trace(trace_id)["spans"])
    assert store.trace(trace_id)["explained"]


def row(trace: int, span: int, size: int) -> SpanRow:
    return SpanRow(f"{trace:032x}", f"{span:016x}", None if span == 0 else f"{0:016x}",
                   "work", "svc", "INTERNAL", trace * 1000 + span, trace * 1000 + span + 1,
                   "UNSET", None, {"padding": "x" * size})


def test_the_store_keeps_to_its_bound_dropping_the_oldest_traces_whole(tmp_path):
    path = tmp_path / tracing.STORE_FILE
    writer = TraceWriter(path, max_bytes=200_000)
    for trace in range(200):  # 200 traces of 3 spans of ~1.2 kB: ~720 kB written
        writer.write([row(trace, span, 1000) for span in range(3)])
    reader = TraceReader(path)
    kept = reader.recent(1000)
    assert 100_000 < sum(t["spans"] * 1250 for t in kept) <= 200_000 + 4 * 3750
    assert kept[0]["trace_id"] == f"{199:032x}"  # the newest stays
    oldest = int(kept[-1]["trace_id"], 16)
    assert [int(t["trace_id"], 16) for t in kept] == list(range(199, oldest - 1, -1))
    assert all(t["spans"] == 3 for t in kept)  # none cut in half
    size = path.stat().st_size
    for trace in range(200, 400):  # as much again: the file does not grow with it
        writer.write([row(trace, span, 1000) for span in range(3)])
    assert path.stat().st_size < size * 1.5
    writer.close()


def test_log_lines_about_a_request_name_its_trace(store, caplog):
    handler = logging.getLogger().handlers[0] if logging.getLogger().handlers else None
    logging.getLogger().addHandler(caplog.handler)
    tracing.shutdown()  # configured again below, with the capturing handler in place
    tracing.configure("tests", True, 1.0, store.path, 10_000_000)
    scope = tracing.open_scope(tracing.tracer("x"), "x", tracing.SERVER)
    logging.getLogger("t").warning("id=%s failed", "r1")
    scope.close()
    logging.getLogger("t").warning("id=%s idle", "r2")
    about, idle = [r.getMessage() for r in caplog.records if r.name == "t"]
    assert about == f"id=r1 failed trace={tracing.trace_id(scope.span)}"
    assert idle == "id=r2 idle"
    logging.getLogger().removeHandler(caplog.handler)
    assert handler is None or handler in logging.getLogger().handlers


def test_an_untraced_process_makes_no_spans_and_carries_no_context(tmp_path):
    assert tracing.tracer("x") is None and tracing.current_tracer() is None
    assert tracing.open_scope(None, "x", tracing.SERVER) is None
    assert tracing.start_client("svc", "default", "id") is None
    assert tracing.inject({"id": "1"}) == {"id": "1"}
    assert tracing.extract({"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}) is None
    # Nowhere to send spans (no store, no OTLP endpoint) is not traced either.
    assert tracing.configure("tests", True, 1.0, None, 0) is None
    assert tracing.configure("tests", False, 1.0, tmp_path / "t.db", 1000) is None
    assert not (tmp_path / "t.db").exists()


def test_a_call_outside_any_trace_is_sent_unsampled(store):
    outside = tracing.start_client("config", "default", "r1")
    assert outside is not None and not outside.is_recording()
    sent = tracing.inject({}, outside)
    assert not int(sent["traceparent"][-2:], 16) & 1
    served = tracing.open_scope(tracing.tracer("config"), "config", tracing.SERVER,
                                tracing.extract(sent))
    assert not served.span.is_recording()  # the service follows: no trace of it
    served.close()
    scope = tracing.open_scope(tracing.tracer("gateway"), "q", tracing.SERVER)
    inside = tracing.start_client("config", "default", "r2")  # within a request: a span
    assert inside.is_recording() and inside.parent.span_id == \
        scope.span.get_span_context().span_id
    tracing.end(inside)
    scope.close()


def test_a_sampled_out_question_keeps_nothing_and_tells_the_services_so(tmp_path):
    path = tmp_path / tracing.STORE_FILE
    tracing.configure("tests", True, 0.0, path, 10_000_000)
    try:
        scope = tracing.open_scope(tracing.tracer("gateway"), "q", tracing.SERVER)
        sent = tracing.inject({})
        scope.close()
        assert not int(sent["traceparent"][-2:], 16) & 1  # unsampled: the services drop it
        served = tracing.open_scope(tracing.tracer("svc"), "s", tracing.SERVER,
                                    tracing.extract(sent))
        assert not served.span.is_recording()
        served.close()
        tracing.flush()
        assert TraceReader(path).recent() == []
    finally:
        tracing.shutdown()
