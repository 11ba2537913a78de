"""A burst of requests to a processor whose event loop is busy with many streams is
taken at once, not one per event-loop round trip (issue 13, the ``no-service``
defect: above ~128 concurrent streams a text-completion request sometimes got no
``accepted`` within 5 s although the processor was up).

The processor's loop is made busy the way hundreds of token streams make it busy:
many tasks, each doing a little work per round trip, so that one round trip of the
loop takes ~10 ms or more. Taking 200 queued requests one per round trip (the old
receive loop) then takes seconds, and the requester's 5 s ``no-service`` deadline
passes for the later ones; taking what is queued in one go answers them all."""
import asyncio
import time
import uuid

import pytest

from tests.support.openai_server import expected_text
from trustgraph.base import Processor, Requester, ServiceError, Timing
from trustgraph.model.text_completion.openai.provider import Settings
from trustgraph.model.text_completion.service import spec_for
from trustgraph.pubsub import Bus
from trustgraph.schema import TextCompletionRequest, TextCompletionResponse

pytestmark = pytest.mark.timeout(120)

REQUESTS = 200
BUSY_TASKS = 100
WORK_PER_TURN = 0.0001  # seconds of CPU per busy task per loop round trip


async def busy(stop: asyncio.Event) -> None:
    """Like a stream's task: a little CPU work each time the loop comes round."""
    while not stop.is_set():
        until = time.perf_counter() + WORK_PER_TURN
        while time.perf_counter() < until:
            pass
        await asyncio.sleep(0)


async def test_a_burst_of_requests_on_a_busy_loop_is_accepted_not_no_service(
        broker, openai_server):
    flow = f"busy-{uuid.uuid4().hex[:6]}"
    processor = Processor(spec_for("openai"), Settings(
        pulsar_url=broker.url, openai_base_url=openai_server.base_url, tg_flows=[flow]))
    await processor.start()
    bus = Bus(broker.url)
    # accept_timeout: the product's 5 s
    requester = Requester(bus, "text-completion", flow, f"t-{uuid.uuid4().hex[:6]}",
                          timing=Timing(timeout=60))
    await requester.start()
    stop = asyncio.Event()
    load = [asyncio.create_task(busy(stop)) for _ in range(BUSY_TASKS)]
    try:
        answers = await asyncio.gather(*(
            requester.call(TextCompletionRequest(prompt="[tokens=1]"), TextCompletionResponse)
            for _ in range(REQUESTS)), return_exceptions=True)
    finally:
        stop.set()
        await asyncio.gather(*load)
        await bus.close()
        await processor.stop()
    failures = [str(a) for a in answers if isinstance(a, ServiceError | Exception)]
    assert failures == [], f"{len(failures)} of {REQUESTS} failed, e.g. {failures[0]}"
    assert {answer.response for answer in answers} == {expected_text(1)}
