"""text-completion under many concurrent streams (issue 13): they run at once rather
than queue behind a hidden limit, and a request that has to wait for a slot says so."""
import asyncio
import logging
import uuid

from prometheus_client import REGISTRY

from tests.support.openai_server import expected_text
from trustgraph.base import Processor, Requester, Timing
from trustgraph.model.text_completion.openai.provider import Settings
from trustgraph.model.text_completion.service import spec_for
from trustgraph.pubsub import Bus
from trustgraph.schema import TextCompletionRequest, TextCompletionResponse

DEADLINE = 30.0
# More than aiohttp's default connection pool (100) and the old TG_CONCURRENCY (64).
STREAMS = 150


async def started(broker, openai_server, **settings) -> tuple[Processor, Bus, Requester]:
    flow = f"conc-{uuid.uuid4().hex[:6]}"
    processor = Processor(spec_for("openai"), Settings(
        pulsar_url=broker.url, openai_base_url=openai_server.base_url, tg_flows=[flow],
        **settings))
    await processor.start()
    bus = Bus(broker.url)
    requester = Requester(bus, "text-completion", flow, f"t-{uuid.uuid4().hex[:6]}",
                          timing=Timing(timeout=DEADLINE))
    await requester.start()
    return processor, bus, requester


async def test_many_streams_are_open_at_the_provider_at_once(broker, openai_server):
    processor, bus, requester = await started(broker, openai_server)
    try:
        # Each stream holds its connection for 2 s before its first token: all of
        # them open at the server together means nothing queued in between.
        calls = [asyncio.create_task(requester.call(
            TextCompletionRequest(prompt="[tokens=2 first=2]"), TextCompletionResponse))
            for _ in range(STREAMS)]
        async with asyncio.timeout(DEADLINE):
            while openai_server.stats.open_streams < STREAMS:
                await asyncio.sleep(0.01)
            answers = await asyncio.gather(*calls)
        assert {answer.response for answer in answers} == {expected_text(2)}
    finally:
        await bus.close()
        await processor.stop()


def slot_waits() -> float:
    return REGISTRY.get_sample_value("tg_slot_wait_seconds_count",
                                     {"service": "text-completion"}) or 0.0


async def test_a_request_waiting_for_a_slot_is_logged_and_counted(broker, openai_server,
                                                                 caplog):
    processor, bus, requester = await started(broker, openai_server, tg_concurrency=1)
    waits_before = slot_waits()
    try:
        with caplog.at_level(logging.INFO, logger="trustgraph.base.service"):
            first = asyncio.create_task(requester.call(
                TextCompletionRequest(prompt="[tokens=1 first=0.5]"), TextCompletionResponse))
            async with asyncio.timeout(DEADLINE):
                while openai_server.stats.open_streams < 1:
                    await asyncio.sleep(0.01)
                second = await requester.call(TextCompletionRequest(prompt="[tokens=1]"),
                                              TextCompletionResponse)
                await first
        assert second.response == expected_text(1)
        assert any("waits for a slot" in record.getMessage() for record in caplog.records)
        assert slot_waits() == waits_before + 1
    finally:
        await bus.close()
        await processor.stop()
