"""API keys from end to end: made with the tg-* commands on a gateway that starts open,
which closes once the first key exists; revoked; limited (concurrent requests,
requests per minute, LLM tokens per day: 429 with Retry-After, and before the LLM
is called); counted per user on /metrics; and TG_GATEWAY_TOKEN still the admin.

The real config (which keeps the keys), librarian and text-completion processors, on
a real broker; the LLM is the local OpenAI-format server."""
import asyncio
import json
import uuid

import aiohttp
import pytest
import pytest_asyncio

from tests.support.cli import tg_command
from trustgraph.base import Processor
from trustgraph.config.service import SPEC as CONFIG_SPEC
from trustgraph.config.service import ConfigSettings
from trustgraph.gateway.app import Gateway, GatewaySettings
from trustgraph.librarian.service import SPEC as LIBRARIAN_SPEC
from trustgraph.librarian.service import LibrarianSettings
from trustgraph.model.text_completion.openai.provider import Settings as OpenAiSettings
from trustgraph.model.text_completion.service import spec_for
from trustgraph.pubsub.embedded import free_port
from trustgraph.schema import LIBRARIAN_FLOW

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEADLINE = 30.0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(broker, llm, tmp_path_factory):
    """Returns the gateway's URL; the gateway has no token, and no key exists yet."""
    data = tmp_path_factory.mktemp("keys")
    flow = f"keys-{uuid.uuid4().hex[:6]}"
    processors = [
        Processor(CONFIG_SPEC, ConfigSettings(pulsar_url=broker.url,
                                              tg_data_dir=str(data / "config"))),
        Processor(LIBRARIAN_SPEC, LibrarianSettings(
            pulsar_url=broker.url, tg_data_dir=str(data / "library"),
            tg_flows=[LIBRARIAN_FLOW, flow])),
        Processor(spec_for("openai"), OpenAiSettings(
            pulsar_url=broker.url, openai_base_url=llm.base_url, tg_flows=[flow])),
    ]
    for processor in processors:
        await processor.start()
    gateway = Gateway(GatewaySettings(
        pulsar_url=broker.url, tg_gateway_host="127.0.0.1", tg_gateway_port=free_port(),
        tg_flows=[flow], tg_request_timeout=15))
    try:
        yield await gateway.start(), flow, gateway
    finally:
        await gateway.stop()
        for processor in reversed(processors):
            await processor.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def http():
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=DEADLINE)) as http:
        yield http


async def tg(url: str, command: str, *args: str, key: str | None = None
             ) -> tuple[int, str, str]:
    return await tg_command(command, "-u", url, *(["-t", key] if key else []), *args,
                            timeout=DEADLINE)


async def whoami(http, url: str, key: str | None = None) -> tuple[int, dict]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with http.get(url + "api/v1/whoami", headers=headers) as response:
        return response.status, await response.json()


async def until(check) -> None:
    """Until ``check()`` holds: a key change reaches the gateway by a change notice."""
    async with asyncio.timeout(DEADLINE):
        while not await check():
            await asyncio.sleep(0.05)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def keys(stack, http):
    """The first keys, made on the open gateway with the commands: root (admin), then
    alice's with the admin's key once the gateway has closed."""
    url, _, _ = stack
    assert await whoami(http, url) == (200, {"user": "trustgraph", "role": "admin",
                                             "key_id": None, "via": "open"})
    assert (await tg(url, "tg-add-user", "root"))[0] == 0
    code, admin, err = await tg(url, "tg-create-key", "--user", "root", "--role", "admin",
                                "--name", "ops laptop")
    admin = admin.strip()
    assert code == 0 and admin.startswith("tg_") and "shown this once" in err
    await until(lambda: _status(http, url, None, 401))
    assert (await tg(url, "tg-add-user", "alice", key=admin))[0] == 0
    code, alice, _ = await tg(url, "tg-create-key", "--user", "alice", "--role", "user",
                              "--expires", "30d", key=admin)
    assert code == 0
    await until(lambda: _status(http, url, alice.strip(), 200))
    return {"admin": admin, "alice": alice.strip()}


async def _status(http, url: str, key: str | None, status: int) -> bool:
    return (await whoami(http, url, key))[0] == status


async def test_keys_made_with_the_commands_close_the_open_gateway(stack, http, keys):
    url, _, _ = stack
    status, body = await whoami(http, url)
    assert status == 401 and body["error"]["type"] == "auth-required"
    status, body = await whoami(http, url, keys["alice"])
    assert (status, body["user"], body["role"], body["via"]) == (200, "alice", "user", "key")
    code, out, err = await tg(url, "tg-list-keys")
    assert code == 1 and "auth-required" in err
    code, out, _ = await tg(url, "tg-list-keys", key=keys["admin"])
    assert code == 0 and "ops laptop" in out and "alice" in out and "root" in out
    assert not any(secret in out for secret in keys.values())
    code, _, err = await tg(url, "tg-list-keys", key=keys["alice"])
    assert code == 1 and "forbidden" in err and "reader" not in err
    code, out, _ = await tg(url, "tg-show-library-documents", key=keys["alice"])
    assert (code, out) == (0, "no documents in collection 'default' of this key's user\n")
    code, _, err = await tg(url, "tg-show-library-documents", "-U", "bob", key=keys["alice"])
    assert code == 1 and "forbidden" in err and "'bob'" in err
    code, _, err = await tg(url, "tg-create-key", "--user", "nobody", "--role", "user",
                            key=keys["admin"])
    assert code == 1 and "tg-add-user nobody" in err


async def test_a_revoked_key_is_refused(stack, http, keys):
    url, _, _ = stack
    code, secret, _ = await tg(url, "tg-create-key", "--user", "alice", "--role", "reader",
                               key=keys["admin"])
    secret = secret.strip()
    await until(lambda: _status(http, url, secret, 200))
    key_id = (await whoami(http, url, secret))[1]["key_id"]
    code, out, _ = await tg(url, "tg-revoke-key", key_id, key=keys["admin"])
    assert code == 0 and out.startswith(f"revoked {key_id}")
    await until(lambda: _status(http, url, secret, 401))
    status, body = await whoami(http, url, secret)
    assert "revoked" in body["error"]["message"] and secret not in body["error"]["message"]


async def limited_key(url: str, admin: str, http, *limits: str) -> str:
    code, secret, err = await tg(url, "tg-create-key", "--user", "alice", "--role", "user",
                                 *limits, key=admin)
    assert code == 0, err
    await until(lambda: _status(http, url, secret.strip(), 200))
    return secret.strip()


async def complete(http, url: str, flow: str, key: str, prompt: str,
                   streaming: bool = False) -> aiohttp.ClientResponse:
    return await http.post(f"{url}api/v1/flow/{flow}/service/text-completion",
                           json={"prompt": prompt, "streaming": streaming},
                           headers={"Authorization": f"Bearer {key}"})


async def test_requests_per_minute(stack, http, keys):
    url, flow, _ = stack
    key = await limited_key(url, keys["admin"], http, "--per-minute", "3")
    # whoami above spent none: only requests to services count
    for _ in range(3):
        async with await complete(http, url, flow, key, "[tokens=1]") as response:
            assert response.status == 200
    async with await complete(http, url, flow, key, "[tokens=1]") as response:
        body = await response.json()
        assert response.status == 429 and body["error"]["type"] == "rate-limited"
        assert 1 <= int(response.headers["Retry-After"]) <= 20
        assert "3 requests a minute" in body["error"]["message"]


async def test_requests_in_flight(stack, http, keys):
    url, flow, _ = stack
    key = await limited_key(url, keys["admin"], http, "--concurrent", "1")
    slow = await complete(http, url, flow, key, "[tokens=200 delay=0.02]", streaming=True)
    await slow.content.readline()  # it is answering: in flight
    try:
        async with await complete(http, url, flow, key, "[tokens=1]") as response:
            assert response.status == 429
            assert "1 requests in flight" in (await response.json())["error"]["message"]
    finally:
        assert slow.status == 200
        await slow.read()
    async with await complete(http, url, flow, key, "[tokens=1]") as response:
        assert response.status == 200  # the first ended: its slot is free


async def test_llm_tokens_per_day_are_refused_before_the_llm_is_called(stack, http, keys, llm):
    url, flow, gateway = stack
    key = await limited_key(url, keys["admin"], http, "--tokens-per-day", "40")
    # each answer: 11 tokens in (the scripted server's prompt count) + 10 out
    for _ in range(2):
        async with await complete(http, url, flow, key, "[tokens=10]") as response:
            assert response.status == 200
    asked = len(llm.arrivals)
    async with await complete(http, url, flow, key, "[tokens=10]") as response:
        body = await response.json()
        assert response.status == 429 and "40 LLM tokens for today" in body["error"]["message"]
        assert int(response.headers["Retry-After"]) > 0
    assert len(llm.arrivals) == asked  # the LLM never saw it
    # what calls no LLM still may
    async with http.post(f"{url}api/v1/flow/{flow}/service/librarian", json={
            "operation": "list-collections"}, headers={"Authorization": f"Bearer {key}"}
                         ) as response:
        assert response.status == 200 and (await response.json())["collections"] == []
    # the use is reported to the keys service (batched): tokens and last use
    await gateway.core.keys.report()
    code, out, _ = await tg(url, "tg-list-keys", "--user", "alice", "--json",
                            key=keys["admin"])
    listed, = [k for k in json.loads(out) if k["id"] == key[3:19]]
    assert code == 0 and listed["last_used"] is not None


async def test_metrics_per_user_and_role_for_admins_only(stack, http, keys):
    url, flow, _ = stack
    async with await complete(http, url, flow, keys["alice"], "[tokens=3]") as response:
        assert response.status == 200
    async with http.get(url + "metrics", headers={
            "Authorization": f"Bearer {keys['alice']}"}) as response:
        assert response.status == 403
    async with http.get(url + "metrics", headers={
            "Authorization": f"Bearer {keys['admin']}"}) as response:
        text = await response.text()
    assert 'tg_gateway_caller_requests_total{role="user",user="alice"}' in text
    assert 'tg_gateway_llm_tokens_total{direction="out",role="user",user="alice"}' in text
    assert 'tg_gateway_refused_total{reason="rate-limited",role="user",user="alice"}' in text
    assert not any(secret in text or secret[3:19] in text for secret in keys.values())


async def test_the_gateway_token_is_the_admin_of_a_single_user_installation(broker, stack,
                                                                          http, keys):
    _, flow, _ = stack
    gateway = Gateway(GatewaySettings(
        pulsar_url=broker.url, tg_gateway_host="127.0.0.1", tg_gateway_port=free_port(),
        tg_flows=[flow], tg_gateway_token="single-user-secret"))
    url = await gateway.start()
    try:
        status, body = await whoami(http, url, "single-user-secret")
        assert (status, body) == (200, {"user": "trustgraph", "role": "admin",
                                        "key_id": None, "via": "token"})
        assert (await whoami(http, url, keys["alice"]))[1]["user"] == "alice"  # keys too
        assert (await whoami(http, url, "wrong"))[0] == 401
    finally:
        await gateway.stop()
