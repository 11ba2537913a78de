"""text-completion served over a real pulsar-lite broker, through the real openai SDK."""
import asyncio
import os

import pytest

from tests.support.openai_server import expected_text
from trustgraph.base import Processor, Requester, ServiceError, Timing
from trustgraph.model.text_completion.openai.provider import Settings
from trustgraph.model.text_completion.service import spec_for
from trustgraph.pubsub import Bus
from trustgraph.schema import TextCompletionRequest, TextCompletionResponse


@pytest.fixture
async def llm(broker, openai_server):
    settings = Settings(pulsar_url=broker.url, openai_base_url=openai_server.base_url,
                        tg_flows=["default"])  # no config service here
    processor = Processor(spec_for("openai"), settings)
    await processor.start()
    bus = Bus(broker.url)
    requester = Requester(bus, "text-completion", "default", "test-requester",
                          timing=Timing(timeout=10))
    await requester.start()
    yield requester
    await bus.close()
    await processor.stop()


async def test_streaming_deltas_then_one_final(llm):
    # Tokens 10 ms apart arrive one or a few at a time (those that arrived together
    # are one delta): several deltas, in order, then the final record.
    records = [r async for r in llm.stream(TextCompletionRequest(
        prompt="[tokens=20 delay=0.01]", streaming=True), TextCompletionResponse)]
    assert len(records) > 2
    assert [r.end_of_stream for r in records] == [False] * (len(records) - 1) + [True]
    assert "".join(r.response for r in records) == expected_text(20)
    assert records[-1].model == "fake-gpt"
    assert (records[-1].in_token, records[-1].out_token) == (11, 20)


async def test_non_streaming_is_one_record(llm):
    record = await llm.call(TextCompletionRequest(prompt="[tokens=7]"), TextCompletionResponse)
    assert record.end_of_stream and record.response == expected_text(7)


async def test_error_mid_stream_is_final(llm):
    seen = []
    with pytest.raises(ServiceError) as failure:
        async for record in llm.stream(TextCompletionRequest(
                prompt="[tokens=10 fail_after=3]", streaming=True), TextCompletionResponse):
            seen.append(record.response)
    assert failure.value.error.type == "llm-error"
    assert "".join(seen) == "tok0 tok1 tok2 "


async def test_cancel_closes_provider_stream(llm, openai_server):
    stream = llm.stream(TextCompletionRequest(prompt="[tokens=1000 delay=0.01]", streaming=True),
                        TextCompletionResponse)
    await anext(stream)
    await stream.aclose()
    await asyncio.wait_for(openai_server.disconnected.wait(), 1.0)


async def test_a_service_nobody_serves_fails_fast_with_a_clear_error(broker):
    bus = Bus(broker.url)
    requester = Requester(bus, "text-completion", "no-such-flow", "test-absent",
                          timing=Timing(timeout=60, accept_timeout=0.5))
    await requester.start()
    try:
        with pytest.raises(ServiceError) as failure:
            await asyncio.wait_for(requester.call(
                TextCompletionRequest(prompt="hi"), TextCompletionResponse), 5)
        assert failure.value.error.type == "no-service"
        assert "no-such-flow" in failure.value.error.message
    finally:
        await bus.close()


async def test_past_its_backlog_a_processor_refuses_at_once(broker, openai_server):
    settings = Settings(pulsar_url=broker.url, openai_base_url=openai_server.base_url,
                        tg_flows=["busy"], tg_concurrency=1, tg_backlog=1)
    processor = Processor(spec_for("openai"), settings)
    await processor.start()
    bus = Bus(broker.url)
    requester = Requester(bus, "text-completion", "busy", "test-busy", timing=Timing(timeout=10))
    await requester.start()
    try:
        slow = requester.stream(TextCompletionRequest(
            prompt="[tokens=500 delay=0.01]", streaming=True), TextCompletionResponse)
        await anext(slow)  # the one slot is taken
        with pytest.raises(ServiceError) as failure:
            await requester.call(TextCompletionRequest(prompt="[tokens=1]"),
                                 TextCompletionResponse)
        assert failure.value.error.type == "overloaded"
        await slow.aclose()
    finally:
        await bus.close()
        await processor.stop()


async def test_a_request_sent_before_its_service_subscribed_is_sent_again(broker, openai_server):
    flow = "late-" + os.urandom(4).hex()
    bus = Bus(broker.url)
    requester = Requester(bus, "text-completion", flow, "test-late",
                          timing=Timing(timeout=10, accept_timeout=8))
    await requester.start()
    settings = Settings(pulsar_url=broker.url, openai_base_url=openai_server.base_url,
                        tg_flows=[flow])
    processor = Processor(spec_for("openai"), settings)
    try:
        call = asyncio.create_task(requester.call(
            TextCompletionRequest(prompt="[tokens=3]"), TextCompletionResponse))
        await asyncio.sleep(0.2)  # the first send reaches no subscriber and is dropped
        await processor.start()
        record = await asyncio.wait_for(call, 8)
        assert record.response == expected_text(3)
        assert openai_server.stats.requests == 1  # re-sent, but served once
    finally:
        await bus.close()
        await processor.stop()
