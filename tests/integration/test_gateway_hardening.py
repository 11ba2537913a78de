"""The gateway against a hostile client (issue 13): each defect found by trying bad
inputs is a test here, on a real broker in front of real processors
(tests/support/gateway_rig.py)."""
import asyncio
import json
import uuid

import aiohttp
import pytest
import pytest_asyncio

from tests.support.gateway_rig import MAX_TEXTS, gateway_rig
from tests.support.openai_server import expected_text
from trustgraph.base import Requester
from trustgraph.gateway.app import Gateway, GatewaySettings
from trustgraph.pubsub import Bus
from trustgraph.pubsub.embedded import free_port
from trustgraph.pubsub.pulsar_shim import MAX_RECORD_BYTES
from trustgraph.schema import TextCompletionRequest, TextCompletionResponse

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEADLINE = 30.0
SURROGATE = "\udfff"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rig(broker, llm, tmp_path_factory):
    async with gateway_rig(broker.url, llm.base_url, tmp_path_factory.mktemp("rig")) as rig:
        yield rig


@pytest_asyncio.fixture(loop_scope="module")
async def http():
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=DEADLINE)) as http:
        yield http


@pytest_asyncio.fixture(loop_scope="module")
async def ws(rig, http):
    async with http.ws_connect(rig.socket_url) as ws:
        yield ws


def service_url(rig, kind: str) -> str:
    return f"{rig.url}api/v1/flow/{rig.flow}/service/{kind}"


async def post(http, url: str, body: dict | bytes) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with http.post(url, data=data, headers={"Content-Type": "application/json"}
                         ) as response:
        return response.status, await response.json()


async def answer_of(ws, frame: dict) -> list[dict]:
    """Every frame for ``frame``'s id up to its complete one."""
    await ws.send_str(json.dumps(frame))
    got = []
    async with asyncio.timeout(DEADLINE):
        while not got or not got[-1]["complete"]:
            reply = await ws.receive_json()
            if reply.get("id") == frame.get("id"):
                got.append(reply)
    return got


async def still_serving(ws, rig) -> None:
    frames = await answer_of(ws, {"id": uuid.uuid4().hex, "service": "text-completion",
                                  "flow": rig.flow, "request": {"prompt": "[tokens=3]"}})
    assert "".join(f["response"]["response"] for f in frames) == expected_text(3)


# --- 1. a lone surrogate in free text: 400 naming the field, nothing left behind -----

SURROGATE_CASES = [
    ("text-completion", {"prompt": f"say {SURROGATE}"}, "request.prompt"),
    ("librarian", {"operation": "get-document-metadata", "document-id": SURROGATE},
     "request.document-id"),
    ("config", {"operation": "list", "type": SURROGATE}, "request.type"),
    ("prompt", {"id": "kg-prompt", "variables": {"query": [SURROGATE]}},
     "request.variables.query.0"),
]


@pytest.mark.parametrize("kind, request_, field", SURROGATE_CASES)
async def test_lone_surrogate_is_a_400_naming_the_field_over_rest(rig, http, kind, request_,
                                                                   field):
    status, body = await post(http, service_url(rig, kind), request_)
    assert status == 400, body
    assert body["error"]["type"] == "bad-request"
    assert body["error"]["message"].startswith(field + ":")
    assert rig.in_flight() == 0


@pytest.mark.parametrize("kind, request_, field", SURROGATE_CASES)
async def test_lone_surrogate_is_an_error_frame_naming_the_field(rig, ws, kind, request_,
                                                                 field):
    [error] = await answer_of(ws, {"id": "s", "service": kind, "flow": rig.flow,
                                   "request": request_})
    assert error["error"]["type"] == "bad-request"
    assert error["error"]["message"].startswith(field + ":")
    assert rig.in_flight() == 0
    await still_serving(ws, rig)


async def test_lone_surrogate_in_a_query_is_a_400(rig, http):
    status, body = await post(http, rig.url + "api/v1/query",
                              {"query": SURROGATE, "flow": rig.flow})
    assert status == 400 and body["error"]["message"].startswith("query:")
    assert rig.in_flight() == 0


async def test_a_requester_that_cannot_encode_leaves_nothing_registered(broker):
    bus = Bus(broker.url)
    try:
        requester = Requester(bus, "text-completion", "nowhere", f"t-{uuid.uuid4().hex[:6]}")
        await requester.start()
        with pytest.raises(ValueError):
            await requester.call(TextCompletionRequest(prompt=SURROGATE),
                                 TextCompletionResponse)
        assert requester.in_flight() == 0
    finally:
        await bus.close()


# --- 2. requests the broker cannot carry: 413 with the limit, never a 500 ------------

async def test_a_body_over_the_broker_limit_is_413_with_the_limit(rig, http):
    body = {"prompt": "x" * (5 * 1024 * 1024 + 100_000)}
    status, answer = await post(http, service_url(rig, "text-completion"), body)
    assert status == 413 and answer["error"]["type"] == "too-large"
    assert str(MAX_RECORD_BYTES) in answer["error"]["message"]


async def test_a_record_that_grows_past_the_limit_when_encoded_is_413(rig, http, ws):
    # "0," is two bytes on the wire and "0.0," four in the record: the body fits,
    # the record for the bus does not.
    zeros = MAX_RECORD_BYTES // 3
    body = b'{"vector": [' + b",".join([b"0"] * zeros) + b"]}"
    assert len(body) < MAX_RECORD_BYTES
    status, answer = await post(http, service_url(rig, "document-embeddings"), body)
    assert status == 413 and str(MAX_RECORD_BYTES) in answer["error"]["message"]
    frame = b'{"id":"z","service":"document-embeddings","flow":"%s","request":' % (
        rig.flow.encode()) + body + b"}"
    await ws.send_bytes(frame)
    async with asyncio.timeout(DEADLINE):
        error = await ws.receive_json()
    assert error["id"] == "z" and error["error"]["type"] == "too-large"
    assert rig.in_flight() == 0
    await still_serving(ws, rig)


# --- 3. a deeply nested id never kills the socket --------------------------------

async def test_a_deeply_nested_id_gets_an_error_frame_and_the_socket_lives(rig, ws):
    # Deep enough that parsing succeeds and echoing the id back recursed too deep
    # (the depth that does it depends on the stack it runs on: try a range).
    for depth in range(900, 1000):
        await ws.send_str('{"id": ' + "[" * depth + "]" * depth +
                          ', "service": "text-completion", "request": {}}')
        async with asyncio.timeout(DEADLINE):
            error = await ws.receive_json()
        assert error["id"] is None and error["error"]["type"] == "bad-request"
    await still_serving(ws, rig)


@pytest.mark.parametrize("client_id", [{"a": 1}, [1], True, None, 1.5e300])
async def test_only_string_and_number_ids_are_echoed(rig, ws, client_id):
    await ws.send_str(json.dumps({"id": client_id, "service": "nope", "request": {}}))
    async with asyncio.timeout(DEADLINE):
        error = await ws.receive_json()
    echoed = client_id if isinstance(client_id, float) else None
    assert error["id"] == echoed and error["complete"]


# --- 4. frames past aiohttp's limit, aiohttp's own errors, client mistakes -----------

async def test_a_huge_frame_is_413_and_the_socket_stays(rig, ws):
    await ws.send_str('{"id": "huge", "service": "text-completion", "request": {"prompt": "'
                      + "y" * (18 * 1024 * 1024) + '"}}')
    async with asyncio.timeout(DEADLINE):
        error = await ws.receive_json()
    assert error["id"] == "huge" and error["error"]["type"] == "too-large"
    await still_serving(ws, rig)


@pytest.mark.parametrize("method, path, status", [
    ("GET", "api/v1/query", 405),
    ("DELETE", "api/v1/flow/default/service/text-completion", 405),
    ("GET", "nowhere/<script>alert(1)</script>", 404),
    ("POST", "api/v1/flow/x", 404),
])
async def test_aiohttp_errors_are_json_and_do_not_echo_the_url(rig, http, method, path,
                                                               status):
    async with http.request(method, rig.url + path) as response:
        assert response.status == status
        assert response.content_type == "application/json"
        body = await response.json()
    assert set(body["error"]) == {"type", "message"}
    assert path not in json.dumps(body) and "script" not in json.dumps(body)


async def test_an_over_long_request_line_is_a_json_400(rig):
    host, port = rig.url.removeprefix("http://").rstrip("/").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        async with asyncio.timeout(DEADLINE):
            reply = await reader.read()
    finally:
        writer.close()
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.") and head[9:12] == b"400"
    assert b"application/json" in head.lower()
    assert json.loads(body)["error"]["type"] == "bad-request"
    assert b"aaaa" not in reply


@pytest.mark.parametrize("kind, request_, status, error_type", [
    ("prompt", {"id": "no-such-template", "variables": {}}, 404, "not-found"),
    ("prompt", {"id": "kg-prompt", "variables": {}}, 400, "bad-request"),
    ("librarian", {"operation": "get-document-metadata", "document-id": "nope"}, 404,
     "not-found"),
    ("embeddings", {"texts": ["t"] * (MAX_TEXTS + 1)}, 400, "too-many-texts"),
    ("config", {"operation": "get", "keys": [{"type": "prompt", "key": "nope"}]}, 404,
     "not-found"),
])
async def test_client_mistakes_are_4xx_not_502(rig, http, kind, request_, status, error_type):
    got, body = await post(http, service_url(rig, kind), request_)
    assert (got, body["error"]["type"]) == (status, error_type), body


# --- 5. /metrics behind the token -----------------------------------------------

@pytest.mark.parametrize("metrics_open, headers, status", [
    (False, {}, 401),
    (False, {"Authorization": "Bearer secret"}, 200),
    (True, {}, 200),
])
async def test_metrics_need_the_token_unless_opened(broker, llm, http, tmp_path_factory,
                                                    metrics_open, headers, status):
    gateway = Gateway(GatewaySettings(
        pulsar_url=broker.url, tg_gateway_host="127.0.0.1", tg_gateway_port=free_port(),
        tg_gateway_token="secret", tg_metrics_open=metrics_open, tg_gateway_keys=False))
    url = await gateway.start()
    try:
        async with http.get(url + "metrics", headers=headers) as response:
            assert response.status == status
            if status == 401:
                assert (await response.json())["error"]["type"] == "auth-required"
    finally:
        await gateway.stop()
