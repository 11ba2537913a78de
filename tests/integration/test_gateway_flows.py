"""The flow service through a gateway that follows config (real broker, config
service, API keys): the answers TrustGraph's client reads, who may list and who may
start and stop, a started flow routed at once, a stopped one a 404 naming the flows
that run, and each refusal of start-flow naming what is wrong."""
import json
import uuid

import aiohttp
import pytest
import pytest_asyncio

from tests.support.flows import FlowService
from tests.support.tenants import make_keys
from trustgraph.base import (
    FlowParameters,
    Processor,
    ProcessorSettings,
    ProcessorSpec,
    Service,
)
from trustgraph.config.service import SPEC as CONFIG_SPEC
from trustgraph.gateway.app import Gateway, GatewaySettings
from trustgraph.pubsub import Bus
from trustgraph.pubsub.embedded import free_port
from trustgraph.schema import TextCompletionRequest, TextCompletionResponse

pytestmark = pytest.mark.asyncio(loop_scope="module")

LLM = f"flows-llm-{uuid.uuid4().hex[:6]}"  # the processor a test blueprint names
BLUEPRINT = {"description": "an LLM that says its model", "processors": [LLM],
             "parameters": {"llm-model": {"type": "llm-model"},
                            "temperature": {"type": "temperature"}},
             "interfaces": ["text-completion"]}


class Model(FlowParameters):
    llm_model: str | None = None


async def says_its_model(request: TextCompletionRequest, ctx) -> TextCompletionResponse:
    return TextCompletionResponse(response=str(ctx.parameters.of(Model).llm_model),
                                  end_of_stream=True)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def gateway(broker, tmp_path_factory, bus_module):
    config = Processor(CONFIG_SPEC, ProcessorSettings(
        pulsar_url=broker.url, tg_data_dir=str(tmp_path_factory.mktemp("config"))))
    llm = Processor(ProcessorSpec(LLM, ProcessorSettings, lambda runtime: [Service(
        "text-completion", TextCompletionRequest, TextCompletionResponse, says_its_model)]),
        ProcessorSettings(pulsar_url=broker.url))
    await config.start()
    await llm.start()
    await (await FlowService(bus_module).started()).put_blueprint("echo", BLUEPRINT)
    keys = await make_keys(broker.url)
    gateway = Gateway(GatewaySettings(pulsar_url=broker.url, tg_gateway_host="127.0.0.1",
                                      tg_gateway_port=free_port(), tg_request_timeout=15))
    url = await gateway.start()
    yield url, keys
    await gateway.stop()
    await llm.stop()
    await config.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def bus_module(broker):
    bus = Bus(broker.url)
    yield bus
    await bus.close()


async def flow_op(url: str, key: str, **request) -> tuple[int, dict]:
    """The flow service over REST (any flow in the path: it is outside flows)."""
    async with aiohttp.ClientSession() as http, http.post(
            f"{url}api/v1/flow/default/service/flow", json=request,
            headers={"Authorization": f"Bearer {key}"}) as answer:
        return answer.status, await answer.json()


async def complete(url: str, key: str, flow: str) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as http, http.post(
            f"{url}api/v1/flow/{flow}/service/text-completion",
            json={"system": "", "prompt": "hi"},
            headers={"Authorization": f"Bearer {key}"}) as answer:
        return answer.status, await answer.json()


async def test_listing_answers_as_trustgraphs_client_reads_it(gateway):
    url, keys = gateway
    status, listed = await flow_op(url, keys.reader, operation="list-flows")
    assert status == 200 and "default" in listed["flow-ids"]
    status, blueprints = await flow_op(url, keys.reader, operation="list-blueprints")
    assert {"default", "echo"} <= set(blueprints["blueprint-names"])
    _, got = await flow_op(url, keys.reader, operation="get-flow", **{"flow-id": "default"})
    assert json.loads(got["flow"])["blueprint-name"] == "default"
    _, got = await flow_op(url, keys.reader, operation="get-blueprint",
                           **{"blueprint-name": "echo"})
    assert json.loads(got["blueprint-definition"])["processors"] == [LLM]


async def test_only_an_admin_starts_and_stops_flows(gateway):
    url, keys = gateway
    for key in (keys.alice, keys.reader):
        status, refused = await flow_op(url, key, operation="start-flow",
                                        **{"flow-id": "mine", "blueprint-name": "echo"})
        assert status == 403 and refused["error"]["type"] == "forbidden"
        status, _ = await flow_op(url, key, operation="stop-flow", **{"flow-id": "default"})
        assert status == 403


async def test_a_started_flow_is_routed_at_once_and_a_stopped_one_is_not_found(gateway):
    url, keys = gateway
    flow = f"f-{uuid.uuid4().hex[:6]}"
    status, _ = await complete(url, keys.alice, flow)
    assert status == 404
    status, _ = await flow_op(url, keys.admin, operation="start-flow", **{
        "flow-id": flow, "blueprint-name": "echo", "description": "d",
        "parameters": {"llm-model": "small", "temperature": "0.5"}})
    assert status == 200
    status, answer = await complete(url, keys.alice, flow)  # routed: no 404, no wait
    assert (status, answer["response"]) == (200, "small")
    _, got = await flow_op(url, keys.reader, operation="get-flow", **{"flow-id": flow})
    assert json.loads(got["flow"])["parameters"] == {"llm-model": "small", "temperature": 0.5}

    status, _ = await flow_op(url, keys.admin, operation="stop-flow", **{"flow-id": flow})
    assert status == 200
    status, refused = await complete(url, keys.alice, flow)
    assert status == 404 and refused["error"]["type"] == "unknown-flow"
    assert f"'{flow}'" in refused["error"]["message"]
    assert "running: default" in refused["error"]["message"]


@pytest.mark.parametrize(("request_", "status", "says"), [
    ({"flow-id": "x1", "blueprint-name": "echo", "parameters": {"temperature": "hot"}},
     400, "parameter temperature: 'hot' is not a number"),
    ({"flow-id": "x2", "blueprint-name": "echo", "parameters": {"colour": "red"}},
     400, "parameters: colour not declared by blueprint 'echo'"),
    ({"flow-id": "x3", "blueprint-name": "nope"}, 404, "no blueprint 'nope'"),
    ({"flow-id": "default", "blueprint-name": "echo"}, 409, "flow 'default' is running already"),
    ({"flow-id": "a:b", "blueprint-name": "echo"}, 400, "flow-id: 'a:b' is not a flow id"),
])
async def test_start_flow_refuses_naming_what_is_wrong(gateway, request_, status, says):
    url, keys = gateway
    got, refused = await flow_op(url, keys.admin, operation="start-flow", **request_)
    assert got == status and refused["error"]["message"].startswith(says)
    _, listed = await flow_op(url, keys.reader, operation="list-flows")
    assert request_["flow-id"] not in listed["flow-ids"] or request_["flow-id"] == "default"
