"""REST in front of the bus (PROTOCOL §3): JSON, NDJSON and SSE; errors as HTTP
statuses; a dropped HTTP client stops the LLM stream."""
import asyncio
import json
from dataclasses import replace

import aiohttp
import pytest

from tests.support.inprocess import inprocess_stack
from tests.support.openai_server import expected_text
from trustgraph.base import TIMING, Processor
from trustgraph.config.service import SPEC as CONFIG_SPEC
from trustgraph.config.service import ConfigSettings
from trustgraph.gateway.app import SHUTDOWN_GRACE, Gateway, GatewaySettings
from trustgraph.gateway.core import dispatch
from trustgraph.model.text_completion.openai.provider import Settings as OpenAiSettings
from trustgraph.model.text_completion.provider import LlmSettings
from trustgraph.model.text_completion.service import spec_for
from trustgraph.pubsub.embedded import free_port

DEADLINE = 30.0
PATH = "api/v1/flow/{flow}/service/{kind}"


@pytest.fixture
async def session():
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=DEADLINE)) as session:
        yield session


@pytest.fixture
async def gateway(broker, openai_server):
    async with inprocess_stack(broker.url, openai_server.base_url) as url:
        yield url


def endpoint(gateway: str, flow: str = "default", kind: str = "text-completion") -> str:
    return gateway + PATH.format(flow=flow, kind=kind)


async def test_json_answer_is_the_final_record(gateway, session):
    async with session.post(endpoint(gateway), json={"prompt": "[tokens=5]"}) as response:
        assert response.status == 200
        assert response.content_type == "application/json"
        body = await response.json()
    assert body == {"response": expected_text(5), "end_of_stream": True, "in_token": 11,
                    "out_token": 5, "model": "fake-gpt"}


async def ndjson_records(response: aiohttp.ClientResponse) -> list[dict]:
    assert response.status == 200
    assert response.content_type == "application/x-ndjson"
    return [json.loads(line) async for line in response.content if line.strip()]


@pytest.mark.parametrize("how", ["body", "accept"])
async def test_ndjson_stream(gateway, session, how):
    body, headers = {"prompt": "[tokens=300 delay=0]"}, {}
    if how == "body":
        body["streaming"] = True
    else:
        headers["Accept"] = "application/x-ndjson"
    async with session.post(endpoint(gateway), json=body, headers=headers) as response:
        records = await ndjson_records(response)
    assert "".join(record["response"] for record in records) == expected_text(300)
    assert [record["end_of_stream"] for record in records] == [False] * (len(records) - 1) + [True]
    assert records[-1]["out_token"] == 300


async def test_sse_stream(gateway, session):
    async with session.post(endpoint(gateway), json={"prompt": "[tokens=40]"},
                            headers={"Accept": "text/event-stream"}) as response:
        assert response.status == 200 and response.content_type == "text/event-stream"
        text = (await response.read()).decode()
    events = [block for block in text.split("\n\n") if block]
    assert all(event.startswith("data: ") for event in events)
    records = [json.loads(event.removeprefix("data: ")) for event in events]
    assert "".join(record["response"] for record in records) == expected_text(40)
    assert records[-1]["end_of_stream"] and len(records) > 1


async def test_service_error_is_502_with_the_final_record(gateway, session):
    async with session.post(endpoint(gateway), json={"prompt": "[status=400]"}) as response:
        assert response.status == 502
        body = await response.json()
    assert body["end_of_stream"] is True and body["error"]["type"] == "llm-error"


async def test_service_error_mid_stream_is_the_last_line(gateway, session):
    async with session.post(endpoint(gateway), json={
            "prompt": "[tokens=10 fail_after=3]", "streaming": True}) as response:
        records = await ndjson_records(response)
    assert "".join(record["response"] for record in records[:-1]) == expected_text(3)
    assert records[-1]["error"]["type"] == "llm-error" and records[-1]["end_of_stream"]


@pytest.mark.parametrize("url_args, body, status, error_type, named", [
    ({}, b"{not json", 400, "bad-request", "not valid JSON"),
    ({}, b"", 400, "bad-request", "body"),
    ({}, b'["a list"]', 400, "bad-request", "JSON object"),
    ({}, b'{"system": "s"}', 400, "bad-request", "request.prompt"),
    ({}, b'{"prompt": "p", "streaming": "often"}', 400, "bad-request", "request.streaming"),
    ({"kind": "no-such-service"}, b'{"prompt": "p"}', 404, "unknown-service", "no-such-service"),
    ({"flow": "elsewhere"}, b'{"prompt": "p"}', 404, "unknown-flow", "elsewhere"),
])
async def test_bad_requests(gateway, session, url_args, body, status, error_type, named):
    async with session.post(endpoint(gateway, **url_args), data=body,
                            headers={"Content-Type": "application/json"}) as response:
        assert response.status == status
        error = (await response.json())["error"]
    assert error["type"] == error_type and named in error["message"]
    assert "Traceback" not in error["message"]


async def test_timeout_is_504(broker, openai_server, session):
    async with inprocess_stack(broker.url, openai_server.base_url,
                               tg_request_timeout=0.5) as gateway:
        async with session.post(endpoint(gateway), json={"prompt": "[tokens=2 first=5]"}
                                ) as response:
            assert response.status == 504
            assert (await response.json())["error"]["type"] == "timeout"


async def test_oversize_body_is_413(broker, openai_server, session):
    async with inprocess_stack(broker.url, openai_server.base_url,
                               tg_gateway_max_frame=1000) as gateway:
        async with session.post(endpoint(gateway), json={"prompt": "x" * 2000}) as response:
            assert response.status == 413
            assert (await response.json())["error"]["type"] == "too-large"


async def test_dropped_http_client_closes_the_llm_stream(gateway, session, openai_server):
    response = await session.post(endpoint(gateway), json={
        "prompt": "[tokens=1000 delay=0.01]", "streaming": True})
    assert json.loads(await response.content.readline())["end_of_stream"] is False
    response.close()  # drops the connection mid-stream
    await asyncio.wait_for(openai_server.disconnected.wait(), 1.0)


async def test_openapi_and_metrics(gateway, session):
    async with session.post(endpoint(gateway), json={"prompt": "[tokens=1]"}) as response:
        assert response.status == 200
    async with session.get(gateway + "api/v1/openapi.json") as response:
        spec = await response.json()
    assert "/api/v1/flow/{flow}/service/text-completion" in spec["paths"]
    assert "TextCompletionRequest" in spec["components"]["schemas"]
    async with session.get(gateway + "metrics") as response:
        metrics = await response.text()
    assert 'tg_gateway_requests_total{service="text-completion",transport="rest"}' in metrics


@pytest.fixture
async def guarded(broker, openai_server):
    async with inprocess_stack(broker.url, openai_server.base_url, token="s3cret") as url:
        yield url


@pytest.mark.parametrize("options, status", [
    ({}, 401),
    ({"headers": {"Authorization": "Bearer wrong"}}, 401),
    ({"params": {"token": "wrong"}}, 401),
    ({"headers": {"Authorization": "Bearer s3cret"}}, 200),
    ({"params": {"token": "s3cret"}}, 200),
])
async def test_rest_auth(guarded, session, options, status):
    async with session.post(endpoint(guarded), json={"prompt": "[tokens=2]"},
                            **options) as response:
        assert response.status == status
        body = await response.json()
    if status == 401:
        assert body["error"]["type"] in ("auth-required", "auth-failed")
        assert response.headers["WWW-Authenticate"] == "Bearer"
    else:
        assert body["response"] == expected_text(2)


async def test_stopping_cuts_a_long_http_stream(broker, openai_server, session):
    llm = Processor(spec_for("openai"), OpenAiSettings(  # no config: pinned to default
        pulsar_url=broker.url, openai_base_url=openai_server.base_url, tg_flows=["default"]))
    await llm.start()
    gateway = Gateway(GatewaySettings(pulsar_url=broker.url, tg_gateway_port=free_port(),
                                      tg_gateway_keys=False, tg_flows=["default"]))
    try:
        url = await gateway.start()
        response = await session.post(endpoint(url), json={
            "prompt": "[tokens=100000 delay=0.01]", "streaming": True})
        assert json.loads(await response.content.readline())["end_of_stream"] is False
        await asyncio.wait_for(gateway.stop(), SHUTDOWN_GRACE + 5)
        await asyncio.wait_for(openai_server.disconnected.wait(), 1.0)
        response.close()
    finally:
        await gateway.stop()
        await llm.stop()


async def recorded_llm(session: aiohttp.ClientSession, url: str) -> dict:
    """``GET /api/v1/llm`` once text-completion has recorded its choice (it does so in
    the background as it starts)."""
    for _ in range(200):
        async with session.get(url + "api/v1/llm") as response:
            assert response.status == 200
            llm = await response.json()
        if llm["provider"] or llm["notice"]:
            return llm
        await asyncio.sleep(0.05)
    raise AssertionError("text-completion never recorded which LLM answers")


@pytest.mark.parametrize("provider", ["openai", ""])
async def test_llm_endpoint_says_which_llm_answers_as_text_completion_recorded_it(
        broker, session, tmp_path, provider):
    """The gateway asks config, where text-completion wrote its choice: not its own
    environment, which here names no LLM at all."""
    config = Processor(CONFIG_SPEC, ConfigSettings(pulsar_url=broker.url,
                                                   tg_data_dir=str(tmp_path)))
    llm_settings = OpenAiSettings(pulsar_url=broker.url, tg_llm_model="gpt-test",
                                  openai_base_url="http://127.0.0.1:9/v1") if provider \
        else LlmSettings(pulsar_url=broker.url)
    llm = Processor(spec_for(provider), llm_settings)
    gateway = Gateway(GatewaySettings(pulsar_url=broker.url, tg_gateway_port=free_port()))
    await config.start()
    await llm.start()
    url = await gateway.start()
    try:
        answered = await recorded_llm(session, url)
    finally:
        await gateway.stop()
        await llm.stop()
        await config.stop()
    if provider:
        assert answered == {"provider": "openai", "model": "gpt-test", "demo": False,
                            "notice": ""}
    else:
        assert (answered["provider"], answered["demo"]) == ("", False)
        assert "TG_LLM" in answered["notice"]


async def test_llm_endpoint_with_nothing_recorded_has_nothing_to_say(broker, session,
                                                                     monkeypatch):
    # No config service takes the gateway's request: given up after accept_timeout
    # (the product's 5 s would only make the test wait).
    monkeypatch.setattr(dispatch, "TIMING", replace(TIMING, accept_timeout=0.5))
    gateway = Gateway(GatewaySettings(pulsar_url=broker.url, tg_gateway_port=free_port(),
                                      tg_request_timeout=5, tg_gateway_keys=False,
                                      tg_flows=["default"]))  # no config service here
    url = await gateway.start()
    try:
        async with session.get(url + "api/v1/llm") as response:
            assert response.status == 200
            assert await response.json() == {"provider": "", "model": "", "demo": False,
                                             "notice": ""}
    finally:
        await gateway.stop()
