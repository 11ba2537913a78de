"""An answer lost in transit ends its request soon, not after TG_REQUEST_TIMEOUT.

Responses travel on non-persistent topics, so a broker restart drops what is in
flight. A request whose service had accepted it, and whose only record was then lost,
used to wait out the whole silence timeout (120 s by default): while it did, a
pipeline stage that had made that request held its concurrency slot, and ingestion
stalled (test_ingest_kill failed this way when tg-start restarted the broker). Now a
service keeps telling its requester that it still has the request while it sends
nothing, and a requester that hears nothing at all for ``liveness`` seconds fails
with a timeout that says so. (An answer a running service still keeps is sent again
when the requester asks after it: test_lost_answers.py.)
"""
import asyncio
import uuid

import pytest

from trustgraph.base import (
    Processor,
    ProcessorSettings,
    ProcessorSpec,
    Requester,
    RequestTimeout,
    Service,
    Timing,
)
from trustgraph.pubsub import Bus
from trustgraph.schema import TextCompletionRequest, TextCompletionResponse, request_topic

pytestmark = pytest.mark.timeout(60)

LIVENESS = 0.5  # the requester's, in these tests (the product's is 10 s)


@pytest.fixture
async def bus(broker):
    bus = Bus(broker.url)
    yield bus
    await bus.close()


async def requester(bus: Bus, flow: str) -> Requester:
    started = Requester(bus, "text-completion", flow, f"t-{uuid.uuid4().hex[:6]}",
                        Timing(timeout=30, keep_alive=LIVENESS / 5))
    await started.start()
    return started


async def test_an_accepted_request_whose_answer_is_lost_fails_within_the_liveness(bus):
    """The service says ``accepted`` and then nothing reaches the requester, as when
    its answer was dropped by a broker restart: a timeout that names the cause, long
    before the 30 s silence timeout."""
    flow = f"lost-{uuid.uuid4().hex[:6]}"
    replies = {}

    async def accept_and_lose(message):
        if message.properties().get("probe"):
            return  # asked after its answer: it has nothing to say (a lost answer kept
            # nowhere, as when the broker restarted with it in flight)
        topic = message.properties()["reply-to"]
        if topic not in replies:
            replies[topic] = await bus.producer(topic)
        await replies[topic].send(b"", {"id": message.properties()["id"], "accepted": "1"})

    await bus.consume(request_topic("text-completion", flow), "text-completion",
                      accept_and_lose)
    asking = await requester(bus, flow)
    with pytest.raises(RequestTimeout, match="went quiet: not a word for 0.5 s"):
        await asking.call(TextCompletionRequest(prompt="hello"), TextCompletionResponse)
    assert asking.in_flight() == 0


async def test_a_service_working_quietly_keeps_its_request_alive(broker, bus):
    """A handler that takes many liveness windows before its one record: the
    processor's keep-alives hold the request, and the answer arrives."""
    flow = f"quiet-{uuid.uuid4().hex[:6]}"

    async def slow(request: TextCompletionRequest, ctx) -> TextCompletionResponse:
        await asyncio.sleep(6 * LIVENESS)
        return TextCompletionResponse(response=f"{request.prompt}, at last",
                                      end_of_stream=True)

    spec = ProcessorSpec(name="slow", settings=ProcessorSettings, services=lambda runtime: [
        Service("text-completion", TextCompletionRequest, TextCompletionResponse, slow)])
    processor = Processor(spec, ProcessorSettings(pulsar_url=broker.url, tg_flows=[flow]),
                          timing=Timing(keep_alive=LIVENESS / 5))
    await processor.start()
    try:
        asking = await requester(bus, flow)
        answer = await asking.call(TextCompletionRequest(prompt="hello"),
                                   TextCompletionResponse)
        assert answer.response == "hello, at last"
    finally:
        await processor.stop()
