"""A hop's spans (``trustgraph.tracing.spans``) when its trace is kept and when it
is not: most questions are not (TG_TRACE_SAMPLE), and theirs must cost little
and still pass the decision on, so that a trace is kept whole or not at all. A
request's response records carry no trace context either way: the request
carried it, once."""
import pytest

from tests.support.traces import traced
from trustgraph import tracing
from trustgraph.base import Delta
from trustgraph.base.reply import BusReply
from trustgraph.schema import TextCompletionResponse

NOT_KEPT = f"00-{'2' * 32}-{'3' * 16}-00"
KEPT = f"00-{'4' * 32}-{'5' * 16}-01"


@pytest.fixture
def traces(tmp_path):
    with traced(tmp_path, sample=0.0) as traces:  # the gateway keeps nothing of its own
        yield traces


def serving(traceparent: str) -> tracing.Scope:
    """A service's span of a request that came with ``traceparent``."""
    scope = tracing.open_scope(tracing.tracer("text-completion"), "text-completion",
                               tracing.SERVER, tracing.extract({"traceparent": traceparent}),
                               {tracing.names.REQUEST_ID: "r1"})
    assert scope is not None
    return scope


def sampled(traceparent: str) -> bool:
    return bool(int(traceparent.rsplit("-", 1)[1], 16) & 1)


def test_a_hop_of_a_trace_not_kept_records_nothing_and_passes_that_on(traces):
    scope = serving(NOT_KEPT)
    try:
        assert not scope.span.is_recording() and tracing.kept_trace_id(scope) is None
        assert tracing.current_trace_id() == "2" * 32  # its log lines still name it
        call = tracing.start_client("prompt", "default", "r2")
        assert call is not None and not call.is_recording()
        sent = tracing.inject({}, call)["traceparent"]
        assert sent.split("-")[1] == "2" * 32 and not sampled(sent)
        tracing.end(call)
    finally:
        scope.close()
    assert tracing.current_trace_id() is None


def test_a_question_the_gateway_does_not_keep_says_so_to_the_next_hop(traces):
    scope = tracing.open_scope(tracing.tracer("gateway"), "websocket text-completion",
                               tracing.SERVER, tracing.from_client({}, {}))
    assert scope is not None and tracing.kept_trace_id(scope) is None
    try:
        call = tracing.start_client("text-completion", "default", "r1")
        assert call is not None
        sent = tracing.inject({}, call)["traceparent"]
        assert sent.split("-")[1] == tracing.trace_id(scope.span) and not sampled(sent)
    finally:
        scope.close()


def test_a_hop_of_a_kept_trace_records_its_spans_under_the_callers(traces):
    scope = serving(KEPT)
    try:
        assert scope.span.is_recording() and tracing.kept_trace_id(scope) == "4" * 32
        assert scope.span.parent is not None and scope.span.parent.span_id == int("5" * 16, 16)
        call = tracing.start_client("prompt", "default", "r2")
        assert call is not None and call.is_recording()
        assert call.parent.span_id == scope.span.get_span_context().span_id  # type: ignore[attr-defined]
        assert sampled(tracing.inject({}, call)["traceparent"])
        tracing.end(call)
    finally:
        scope.close()


class Producer:
    def __init__(self) -> None:
        self.properties: list[dict[str, str]] = []

    async def post(self, data: bytes, properties: dict[str, str]) -> None:
        self.properties.append(properties)

    async def send(self, data: bytes, properties: dict[str, str]) -> None:
        self.properties.append(properties)


@pytest.mark.parametrize("traceparent", [NOT_KEPT, KEPT])
async def test_streamed_records_carry_no_trace_context(traces, traceparent):
    scope = serving(traceparent)
    producer = Producer()
    try:
        reply = BusReply(producer, TextCompletionResponse, "r1")
        for text in ("a", "b"):
            await reply.send(Delta(text), False)
        await reply.send(TextCompletionResponse(end_of_stream=True), True)
    finally:
        scope.close()
    assert producer.properties == [{"id": "r1", "seq": "0"}, {"id": "r1", "seq": "1"},
                                   {"id": "r1", "seq": "2", "end": "1"}]
