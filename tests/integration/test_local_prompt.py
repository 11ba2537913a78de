"""prompt and text-completion served together in one process (a process group) over a
real pulsar-lite broker, against the same pair served apart: the prompt's call to
text-completion skips the bus and nothing else changes.

Flow ``local``: prompt + text-completion started together (``start_together``, as
``tg-run prompt+text-completion`` does). Flow ``bus``: the same two, started apart.
Both use the real openai provider against the local OpenAI-format server.
"""
import asyncio
import uuid

import pytest

from tests.support.openai_server import expected_text
from tests.support.waiting import eventually
from trustgraph.base import Processor, Requester, ServiceError, Timing
from trustgraph.base.local import LocalRequester
from trustgraph.base.processor import start_together, stop_together
from trustgraph.config.service import SPEC as CONFIG_SPEC
from trustgraph.config.service import ConfigSettings
from trustgraph.model.text_completion.openai.provider import Settings as OpenAiSettings
from trustgraph.model.text_completion.service import spec_for
from trustgraph.prompt.service import SPEC as PROMPT_SPEC
from trustgraph.prompt.service import PromptSettings
from trustgraph.pubsub import Bus
from trustgraph.schema import (
    CANCEL_TOPIC,
    Cancel,
    PromptRequest,
    PromptResponse,
    decode,
    encode,
    request_topic,
)

FLOWS = ("local", "bus")


def say(text: str, streaming: bool = True) -> PromptRequest:
    return PromptRequest(id="kg-prompt", streaming=streaming,
                         variables={"query": text, "knowledge": []})


class Pair:
    """config, then prompt + text-completion on each flow, and a requester for each."""

    def __init__(self, broker, openai_server, data_dir) -> None:
        self.url = broker.url
        self.openai_server = openai_server
        self.data_dir = data_dir
        self.bus = Bus(broker.url)
        self.groups: list[list[Processor]] = []

    def members(self, flow: str) -> list[Processor]:
        return [
            Processor(PROMPT_SPEC, PromptSettings(pulsar_url=self.url, tg_flows=[flow],
                                            tg_request_timeout=10)),
            Processor(spec_for("openai"), OpenAiSettings(
                pulsar_url=self.url, tg_flows=[flow],
                openai_base_url=self.openai_server.base_url))]

    async def start(self) -> None:
        config = Processor(CONFIG_SPEC, ConfigSettings(pulsar_url=self.url,
                                                 tg_data_dir=str(self.data_dir)))
        await self._start([config])
        together = self.members("local")
        await self._start(together)
        self.prompt, self.llm = together
        for processor in self.members("bus"):
            await self._start([processor])  # apart: each alone, as two processes
        self.requesters = {flow: await self._requester(flow) for flow in FLOWS}

    async def _start(self, group: list[Processor]) -> None:
        await start_together(group)
        self.groups.append(group)

    async def _requester(self, flow: str) -> Requester:
        requester = Requester(self.bus, "prompt", flow, f"test-{uuid.uuid4().hex[:8]}",
                              timing=Timing(timeout=10))
        await requester.start()
        async with asyncio.timeout(10):  # a just-subscribed service may miss the first
            while True:
                try:
                    async with asyncio.timeout(0.5):
                        await requester.call(PromptRequest(id="no-such"), PromptResponse)
                except ServiceError:
                    return requester  # answered: "no prompt template ..."
                except TimeoutError:
                    pass

    async def stop(self) -> None:
        await self.bus.close()
        for group in reversed(self.groups):
            await stop_together(group)


@pytest.fixture
async def pair(broker, openai_server, tmp_path):
    pair = Pair(broker, openai_server, tmp_path)
    try:
        await pair.start()
        yield pair
    finally:
        await pair.stop()


async def answer(requester: Requester, request: PromptRequest) -> dict:
    """What a caller can see of one answer: the text, the final record, any error,
    and whether deltas came first (how many depends on timing: those already
    waiting travel as one); records end with exactly one final one."""
    text, finals, error = [], [], None
    try:
        async for record in requester.stream(request, PromptResponse):
            assert not finals, "nothing may follow the final record"
            (finals if record.end_of_stream else text).append(record)
    except ServiceError as failure:
        error = (failure.error.type, failure.error.message)
    final = finals[0].model_dump(exclude={"text"}) if finals else None
    return {"text": "".join(r.text for r in text + finals), "final": final, "error": error,
            "deltas": bool(text)}


@pytest.mark.parametrize("request_", [
    say("[tokens=40 delay=0.002]"),
    say("[tokens=7]", streaming=False),
    say("[tokens=10 fail_after=3]"),
], ids=["streaming", "not-streaming", "error-mid-stream"])
async def test_in_one_process_prompt_answers_as_over_the_bus(pair, request_):
    local = await answer(pair.requesters["local"], request_)
    over_bus = await answer(pair.requesters["bus"], request_)
    assert local == over_bus
    tokens = int(request_.variables["query"].split("tokens=")[1].split()[0].rstrip("]"))
    if local["error"]:
        assert local["error"][0] == "llm-error" and local["text"] == expected_text(3)
    else:
        assert local["text"] == expected_text(tokens)
        assert local["final"]["model"] == "fake-gpt" and local["final"]["out_token"] == tokens
        assert local["deltas"] == request_.streaming


async def test_in_one_process_the_prompts_call_does_not_cross_the_bus(pair):
    """Every text-completion request on the bus is seen by an extra subscription; a
    marker sent after the prompt has answered comes first only if none was sent."""
    async def first_seen_after_a_prompt(flow: str) -> dict[str, str]:
        seen: asyncio.Queue = asyncio.Queue()

        async def observe(message) -> None:
            seen.put_nowait(message.properties())

        topic = request_topic("text-completion", flow)
        await pair.bus.consume(topic, f"observer-{uuid.uuid4().hex[:8]}", observe)
        await answer(pair.requesters[flow], say("[tokens=3]"))
        marker = await pair.bus.producer(topic)
        await marker.send(b"{}", {"marker": "1"})
        return await asyncio.wait_for(seen.get(), 5)

    assert "id" in await first_seen_after_a_prompt("bus")  # the observer sees requests
    assert await first_seen_after_a_prompt("local") == {"marker": "1"}
    assert isinstance(await pair.prompt.runtime.clients("local").get("text-completion"),
                      LocalRequester)


@pytest.mark.parametrize("how", ["cancel-topic", "requester-leaves"])
async def test_cancelling_the_outer_request_closes_the_llm_stream(pair, how):
    request_id = uuid.uuid4().hex
    frames = pair.requesters["local"].frames(say("[tokens=1000 delay=0.01]"), request_id)
    first = decode(PromptResponse, (await anext(frames))[0][0])
    assert first.text.startswith("tok0") and not first.end_of_stream
    assert pair.openai_server.stats.open_streams == 1 and len(pair.llm._inflight) == 1
    if how == "cancel-topic":  # what the gateway sends when its client goes away
        producer = await pair.bus.producer(CANCEL_TOPIC)
        await producer.send(encode(Cancel(id=request_id)), {"id": request_id})
    else:
        await frames.aclose()
    await asyncio.wait_for(pair.openai_server.disconnected.wait(), 2.0)
    await eventually(lambda: not (pair.llm._inflight or pair.prompt._inflight),
                     "the inner request to be gone, its slot free", timeout=2)
    await frames.aclose()
    records = [r async for r in pair.requesters["local"].stream(say("[tokens=2]"),
                                                                 PromptResponse)]
    assert "".join(r.text for r in records) == expected_text(2)  # and it still serves
