"""The gateway's ``prompt`` and ``config`` rows, and the client library's ``prompt``
and config helpers, on a real broker in front of the real config and prompt
processors.

The LLM is a tiny text-completion service written here that echoes the rendered
prompt back word by word, so a test chooses the model's answer (text or JSON)
through the template's variables. One stack serves the whole module.
"""
import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio

from tests.support.waiting import serving
from trustgraph.api import AsyncTrustGraph, TrustGraph, TrustGraphError
from trustgraph.base import (
    ConfigClient,
    Context,
    Processor,
    ProcessorSettings,
    ProcessorSpec,
    Service,
)
from trustgraph.config.service import SPEC as CONFIG_SPEC
from trustgraph.config.service import ConfigSettings
from trustgraph.gateway.app import Gateway, GatewaySettings
from trustgraph.prompt.defaults import default_values
from trustgraph.prompt.service import SPEC as PROMPT_SPEC
from trustgraph.prompt.service import PromptSettings
from trustgraph.pubsub import Bus
from trustgraph.pubsub.embedded import free_port
from trustgraph.schema import (
    PromptRequest,
    PromptResponse,
    TextCompletionRequest,
    TextCompletionResponse,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEADLINE = 30.0
PAIRS = {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}
TEMPLATES = {
    "say": {"system": "Be brief.", "prompt": "Say {{ text }}"},
    "pairs": {"prompt": "{{ answer }}", "response-type": "json", "schema": PAIRS},
}


async def echo(request: TextCompletionRequest, ctx: Context
               ) -> AsyncIterator[TextCompletionResponse]:
    """The LLM: answers with the prompt itself, a word at a time when streaming, at a
    model's pace (deltas that wait together are rightly sent as one)."""
    words = request.prompt.split(" ")
    pieces = [word + " " for word in words[:-1]] + words[-1:]
    if request.streaming:
        for n, piece in enumerate(pieces):
            if n:
                await asyncio.sleep(0.02)
            yield TextCompletionResponse(response=piece)
    yield TextCompletionResponse(
        response="" if request.streaming else request.prompt, end_of_stream=True,
        in_token=len(words), out_token=len(pieces), model="echo")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def gateway(broker, tmp_path_factory):
    """The gateway's base URL, with config (holding the defaults and TEMPLATES),
    the echo LLM and the prompt processor behind it."""
    url = broker.url
    started: list[Processor] = []
    bus = Bus(url)
    gateway = Gateway(GatewaySettings(pulsar_url=url, tg_gateway_host="127.0.0.1",
                                      tg_gateway_port=free_port(), tg_request_timeout=10))
    try:
        for processor in (
                Processor(CONFIG_SPEC, ConfigSettings(
                    pulsar_url=url, tg_data_dir=str(tmp_path_factory.mktemp("config")))),
                # Named by no blueprint: pinned to the flow this module asks on.
                Processor(ProcessorSpec("echo-llm", ProcessorSettings, lambda s: [Service(
                    "text-completion", TextCompletionRequest, TextCompletionResponse, echo)]),
                    ProcessorSettings(pulsar_url=url, tg_flows=["default"]))):
            started.append(processor)
            await processor.start()
        config = await ConfigClient.connect(bus, f"test-{uuid.uuid4().hex[:8]}")
        await config.put_many("prompt", {**default_values(), **TEMPLATES})
        started.append(prompt := Processor(PROMPT_SPEC, PromptSettings(pulsar_url=url)))
        await prompt.start()
        await serving(bus, "text-completion", "default", TextCompletionRequest(prompt="hi"),
                      TextCompletionResponse)
        await serving(bus, "prompt", "default", PromptRequest(id="no-such-template"),
                      PromptResponse)
        yield await gateway.start()
    finally:
        await gateway.stop()
        await bus.close()
        for processor in reversed(started):
            await processor.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def ws(gateway):
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(gateway + "api/v1/socket") as ws:
            yield ws


@pytest_asyncio.fixture(loop_scope="module")
async def client(gateway):
    async with AsyncTrustGraph(gateway) as client:
        yield client


def prompt_frame(id: str, template: str, variables: dict, streaming: bool = True,
                 **envelope) -> dict:
    return {"id": id, "service": "prompt", "flow": "default", **envelope, "request": {
        "id": template, "variables": variables, "streaming": streaming}}


# --- the websocket (frames_of: tests/integration/conftest.py) -------------------

async def test_text_prompt_streams_deltas_then_one_final_frame_with_tokens(frames_of):
    frames = await frames_of(prompt_frame("p1", "say", {"text": "one two three four"}))
    *deltas, final = frames
    assert deltas and not any(frame["complete"] for frame in deltas)
    assert "".join(frame["response"]["text"] for frame in deltas) == "Say one two three four"
    assert final["complete"] and final["response"] == {
        "text": "", "end_of_stream": True, "in_token": 5, "out_token": 5, "model": "echo"}


async def test_json_prompt_is_one_checked_object_even_when_streaming(frames_of):
    answer = 'Sure:\n```json\n{"a": 7, "b": ["x"]}\n```'
    [frame] = await frames_of(prompt_frame("j1", "pairs", {"answer": answer}))
    assert frame["complete"] and frame["response"]["end_of_stream"]
    assert "text" not in frame["response"]
    assert json.loads(frame["response"]["object"]) == {"a": 7, "b": ["x"]}


async def test_prompt_errors_arrive_as_the_services_final_response(frames_of):
    [wrong] = await frames_of(prompt_frame("e1", "pairs", {"answer": '{"a": "x"}'}))
    assert wrong["complete"] and wrong["response"]["error"]["type"] == "prompt-error"
    assert "does not match its schema at /a" in wrong["response"]["error"]["message"]
    [missing] = await frames_of(prompt_frame("e2", "say", {}))
    assert "variable 'text' is undefined" in missing["response"]["error"]["message"]


async def test_prompt_is_flow_scoped_but_config_is_not(frames_of):
    [refused] = await frames_of(prompt_frame("f1", "say", {"text": "x"}, flow="nope"))
    assert refused["error"]["type"] == "unknown-flow"
    for envelope in ({"flow": "nope"}, {"flow": "default"}, {}):
        [listed] = await frames_of({"id": "c1", "service": "config", **envelope,
                                    "request": {"operation": "list", "type": "prompt"}})
        assert listed["complete"]
        assert {"say", "pairs", "kg-prompt"} <= set(listed["response"]["directory"])


# --- REST ------------------------------------------------------------------------

async def test_rest_prompt_as_ndjson_and_config_on_any_flow(gateway):
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=DEADLINE)) as http:
        async with http.post(gateway + "api/v1/flow/default/service/prompt", json={
                "id": "say", "variables": {"text": "a b"}, "streaming": True}) as response:
            assert response.content_type == "application/x-ndjson"
            records = [json.loads(line) async for line in response.content if line.strip()]
        assert "".join(record["text"] for record in records) == "Say a b"
        assert records[-1]["end_of_stream"] and records[-1]["model"] == "echo"

        async with http.post(gateway + "api/v1/flow/anything/service/config",
                             json={"operation": "getvalues", "type": "prompt"}) as response:
            assert response.status == 200
            values = {item["key"]: item["value"] for item in (await response.json())["values"]}
        assert values["say"] == TEMPLATES["say"]

        async with http.post(gateway + "api/v1/flow/default/service/config", json={
                "operation": "get", "keys": [{"type": "prompt", "key": "nope"}]}) as response:
            assert response.status == 404
            assert (await response.json())["error"]["type"] == "not-found"

        async with http.get(gateway + "api/v1/openapi.json") as response:
            paths = (await response.json())["paths"]
    assert "/api/v1/flow/{flow}/service/prompt" in paths
    config = paths["/api/v1/flow/{flow}/service/config"]["post"]
    assert "enum" not in config["parameters"][0]["schema"]


# --- the client library ----------------------------------------------------------

async def test_client_prompt_text_whole_and_streamed(client):
    answer = await client.prompt("say", {"text": "hello there"})
    assert answer == "Say hello there"
    assert (answer.usage.in_token, answer.usage.out_token, answer.usage.model) == (3, 3, "echo")

    stream = client.prompt("say", {"text": "one two three"}, streaming=True)
    deltas = [delta async for delta in stream]
    assert "".join(deltas) == "Say one two three" and len(deltas) > 1
    assert (stream.usage.out_token, stream.usage.model, stream.is_object) == (4, "echo", False)


async def test_client_prompt_json_gives_the_parsed_value(client):
    assert await client.prompt("pairs", {"answer": '{"a": 1}'}) == {"a": 1}
    stream = client.prompt("pairs", {"answer": '{"a": 2}'}, streaming=True)
    assert [delta async for delta in stream] == []
    assert (stream.is_object, stream.object, stream.usage.model) == (True, {"a": 2}, "echo")
    with pytest.raises(TrustGraphError) as failure:
        await client.prompt("pairs", {"answer": "no JSON here"})
    assert failure.value.type == "prompt-error" and "not valid JSON" in failure.value.message


async def test_client_config_helpers(client):
    config, version = await client.get_config()
    assert config["prompt"]["say"] == TEMPLATES["say"] and version > 0

    item = {"prompt": "Hi {{ name }}"}
    after_put = await client.put_config({"test-type": {"k1": item, "k2": [1, 2]}})
    assert after_put == version + 1
    assert await client.config_values("test-type") == {"k1": item, "k2": [1, 2]}

    assert await client.delete_config([("test-type", "k1")]) == after_put + 1
    assert await client.config_values("test-type") == {"k2": [1, 2]}
    with pytest.raises(TrustGraphError) as failure:
        await client.delete_config([("test-type", "k1")])
    assert failure.value.type == "not-found"
    assert await client.config_values("no-such-type") == {}


async def test_the_blocking_client_has_them_too(gateway):
    def use() -> tuple:
        with TrustGraph(gateway) as tg:
            stream = tg.prompt("say", {"text": "x y"}, streaming=True)
            return (tg.prompt("pairs", {"answer": '{"a": 3}'}), "".join(stream),
                    stream.usage.model, tg.config_values("prompt")["say"])

    assert await asyncio.to_thread(use) == ({"a": 3}, "Say x y", "echo", TEMPLATES["say"])
