"""Gateway parts that need no broker: settings, request preparation, errors, OpenAPI."""
import pytest

from trustgraph.base import RequestTimeout, ServiceError
from trustgraph.gateway.apis.openapi import openapi
from trustgraph.gateway.app import GatewaySettings
from trustgraph.gateway.core.auth import Auth
from trustgraph.gateway.core.caller import OPEN, TOKEN_ADMIN
from trustgraph.gateway.core.dispatch import Dispatcher
from trustgraph.gateway.core.errors import GatewayError, classify
from trustgraph.gateway.core.openapi import services_document
from trustgraph.gateway.core.services import SERVICES, ServiceRow
from trustgraph.gateway.core.websocket import _leading_id, _too_large
from trustgraph.pubsub.pulsar_shim import MAX_RECORD_BYTES
from trustgraph.schema import Error, Record, Response, TextCompletionRequest


class TenantRequest(Record):
    query: str
    user: str = "trustgraph"
    entity_limit: int = 50


TENANT_ROW = ServiceRow("tenant-test", TenantRequest, Response, "response")


def test_settings_from_environment(monkeypatch):
    monkeypatch.setenv("TG_FLOWS", "default, other")
    monkeypatch.setenv("TG_GATEWAY_PORT", "9999")
    settings = GatewaySettings()
    assert settings.tg_flows == ["default", "other"]
    assert settings.tg_gateway_port == 9999
    assert settings.tg_gateway_token == "" and settings.tg_gateway_max_inflight == 256
    assert settings.tg_gateway_max_frame == MAX_RECORD_BYTES < 5_232_640  # the broker's cap


def test_envelope_user_fills_the_request_only_when_it_has_none():
    assert Dispatcher.prepare(TENANT_ROW, {"query": "q"}, "alice").user == "alice"
    assert Dispatcher.prepare(TENANT_ROW, {"query": "q", "user": "bob"}, "alice").user == "bob"
    assert Dispatcher.prepare(TENANT_ROW, {"query": "q", "entity-limit": 5}).entity_limit == 5


def test_envelope_user_is_ignored_by_a_model_without_user():
    record = Dispatcher.prepare(SERVICES["text-completion"], {"prompt": "p"}, "alice")
    assert record == TextCompletionRequest(prompt="p")


@pytest.mark.parametrize("request_, named", [
    ({}, "request.prompt"),
    ({"prompt": 5}, "request.prompt"),
    ({"prompt": "p", "streaming": "maybe"}, "request.streaming"),
    ([1, 2], "request"),
])
def test_validation_failures_name_the_field(request_, named):
    with pytest.raises(GatewayError) as failure:
        Dispatcher.prepare(SERVICES["text-completion"], request_)
    assert failure.value.type == "bad-request" and failure.value.status == 400
    assert failure.value.message.startswith(named)


def test_unknown_service_and_flow():
    dispatcher = Dispatcher(bus=None, flows=["default"], timeout=1)
    assert dispatcher.resolve("text-completion", "default").name == "text-completion"
    with pytest.raises(GatewayError) as failure:
        dispatcher.resolve("nope", "default")
    assert (failure.value.type, failure.value.status) == ("unknown-service", 404)
    with pytest.raises(GatewayError) as failure:
        dispatcher.resolve("text-completion", "other")
    assert (failure.value.type, failure.value.status) == ("unknown-flow", 404)


def test_classify_maps_each_failure_once():
    assert (classify(RequestTimeout("quiet")).type, classify(RequestTimeout("q")).status) == (
        "timeout", 504)
    failed = classify(ServiceError(Error(type="overflow", message="too slow")))
    assert (failed.type, failed.status) == ("overflow", 502)
    for error_type, status in (("bad-request", 400), ("too-many-texts", 400),
                               ("not-found", 404), ("too-large", 413), ("overloaded", 503)):
        assert classify(ServiceError(Error(type=error_type, message="m"))).status == status
    surprise = classify(KeyError("secret"))
    assert (surprise.type, surprise.status) == ("gateway-error", 500)
    assert "Traceback" not in surprise.message


def test_auth_compares_tokens():
    assert Auth("").open and Auth("").identify("anything") == OPEN == Auth("").identify(None)
    auth = Auth("s3cret")
    assert auth.identify("s3cret") == TOKEN_ADMIN and TOKEN_ADMIN.role == "admin"
    for wrong in ("s3cre", "", 7):
        with pytest.raises(GatewayError) as failure:
            auth.identify(wrong)
        assert (failure.value.type, failure.value.status) == ("auth-failed", 401)
    with pytest.raises(GatewayError) as failure:
        auth.identify(None)
    assert (failure.value.type, failure.value.status) == ("auth-required", 401)


def test_oversize_frames_are_measured_in_bytes_and_keep_a_leading_id():
    assert not _too_large("x" * 10, 10) and _too_large("x" * 11, 10)
    assert _too_large("é" * 6, 10)  # 6 characters, 12 bytes
    assert _leading_id(' {"id": "r\\"1", "request": {"prompt": "' + "x" * 5000) == 'r"1'
    assert _leading_id('{"request": {}, "id": "late"}') is None
    assert _leading_id(b'{"id":"bytes"}') == "bytes"


def test_openapi_describes_every_row():
    spec = openapi([services_document(SERVICES.values(), ["default"])])
    operation = spec["paths"]["/api/v1/flow/{flow}/service/text-completion"]["post"]
    assert operation["parameters"][0]["schema"]["enum"] == ["default"]
    schemas = spec["components"]["schemas"]
    assert schemas["TextCompletionRequest"]["required"] == ["prompt"]
    assert "end_of_stream" in schemas["TextCompletionResponse"]["properties"]
    assert {"/api/v1/socket", "/metrics", "/api/v1/openapi.json"} <= spec["paths"].keys()


def test_text_that_is_not_valid_unicode_is_named():
    from trustgraph.gateway.core.dispatch import lone_surrogate
    assert lone_surrogate({"a": ["ok", {"b": "x\udfffy"}]}) == ["a", "1", "b"]
    assert lone_surrogate({"a": {"\ud800": 1}}) == ["a", "\\ud800"]
    assert lone_surrogate({"a": "\U0001F600", "b": [1, None]}) is None
    with pytest.raises(GatewayError) as failure:
        Dispatcher.prepare(SERVICES["text-completion"], {"prompt": "p", "system": "\udfff"})
    assert failure.value.message.startswith("request.system: not valid Unicode")


def test_a_deeply_nested_field_is_named_briefly():
    deep: object = "x"
    for _ in range(400):
        deep = [deep]
    with pytest.raises(GatewayError) as failure:
        Dispatcher.prepare(SERVICES["prompt"], {"id": "t", "variables": {"v": deep}})
    assert failure.value.status == 400 and len(failure.value.message) < 200
