"""The ``accepted`` marker goes only to a request that has sent no record within
``Timing.accept_after``: a requester takes the first record as acceptance, so a quick answer
(a store query, an embedding, RAG's sources) is one message, not two, on every hop
of an answer's path; a slow one is still told at once that a replica has it."""
import asyncio
import uuid

import pytest

from trustgraph.base import Processor, ProcessorSettings, ProcessorSpec, Service, Timing
from trustgraph.pubsub import Bus
from trustgraph.schema import TextCompletionRequest, TextCompletionResponse, encode, request_topic

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def service(broker, request):
    """text-completion answering at once, or after a second for "slow"; it marks a
    request accepted after ``request.param`` seconds without a record."""
    flow = f"marker-{uuid.uuid4().hex[:6]}"

    async def answer(request: TextCompletionRequest, ctx) -> TextCompletionResponse:
        if request.prompt == "slow":
            await asyncio.sleep(1.0)
        return TextCompletionResponse(response=request.prompt, end_of_stream=True)

    spec = ProcessorSpec(name="marker", settings=ProcessorSettings, services=lambda runtime: [
        Service("text-completion", TextCompletionRequest, TextCompletionResponse, answer)])
    processor = Processor(spec, ProcessorSettings(pulsar_url=broker.url, tg_flows=[flow]),
                          timing=Timing(accept_after=request.param, first_resend=10.0,
                                        resend=10.0))
    await processor.start()
    yield flow
    await processor.stop()


async def replies_to(bus: Bus, flow: str, prompt: str) -> list[dict[str, str]]:
    """The properties of every message answering one request, in order."""
    reply_to = f"non-persistent://tg/response/marker-{uuid.uuid4().hex}"
    seen: list[dict[str, str]] = []
    ended = asyncio.Event()

    async def collect(message):
        seen.append(message.properties())
        if message.properties().get("end"):
            ended.set()

    await bus.consume(reply_to, "marker", collect)
    requests = await bus.producer(request_topic("text-completion", flow))
    await requests.send(encode(TextCompletionRequest(prompt=prompt)),
                        {"id": uuid.uuid4().hex, "reply-to": reply_to})
    async with asyncio.timeout(20):
        await ended.wait()
    return seen


@pytest.mark.parametrize("service", [5.0], indirect=True)  # however slow the machine
async def test_a_quick_answer_comes_without_a_marker(bus, service):
    seen = await replies_to(bus, service, "quick")
    assert [p.get("accepted") for p in seen] == [None]
    assert seen[0].get("end") == "1"


@pytest.mark.parametrize("service", [0.05], indirect=True)
async def test_a_slow_answer_is_preceded_by_a_marker(bus, service):
    seen = await replies_to(bus, service, "slow")
    assert [p.get("accepted") for p in seen] == ["1", None]
    assert seen[1].get("end") == "1"
