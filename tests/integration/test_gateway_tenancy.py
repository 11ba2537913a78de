"""Tenancy across every route and transport (issue 23), on a real broker in front of
real processors (tests/support/gateway_rig.py) and a gateway checking API keys.

Alice and Bob each have documents and triples. Every principal (alice's and bob's
keys, an admin's, a reader's key for alice's data, a revoked key, an expired key, a
key that was never made, no key) asks every service over the websocket and over
REST, and every API route, for its own data, for the other user's, and for no user
named, reading and writing. What each must get is said here, apart from the code's
role table (``expected``): an answer, or a 401/403 whose error names why. An answer
to anyone but the admin must never carry another user's data: 0 leaks.
"""
import asyncio
import base64
import json
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from tests.support.core_probe import core_text, knowledge_core
from tests.support.gateway_rig import gateway_rig
from tests.support.openai_server import OpenAiServer

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEADLINE = 60.0
USERS = ("alice", "bob", "root")
IRI = "http://example.org/"
# principal → (its user, its role); None: it has no valid key
PRINCIPALS: dict[str, tuple[str, str] | None] = {
    "alice": ("alice", "user"), "bob": ("bob", "user"), "admin": ("root", "admin"),
    "reader": ("alice", "reader"), "revoked": None, "expired": None, "unknown": None,
    "none": None}
UNKNOWN_KEY = "tg_0123456789abcdef_" + "A" * 43


# --- the probes: one per service operation or route, and what it may show -----------

@dataclass(frozen=True)
class Probe:
    name: str
    kind: str  # read | write | ask (calls the LLM) | config | admin | internal
    service: str | None  # a service: sent on the websocket and to its REST route
    body: Callable[[], dict[str, Any]]  # the request, naming no user
    scoped: bool = True  # the request has a user (the target is put in it)
    shows: str | None = None  # in an answer: the user's data, "{user}" its user
    method: str = "POST"  # an API route's (``path``)
    path: str | None = None
    upload: Callable[[], bytes] | None = None  # a PUT's body (its request: the query)


def triple(user: str, what: str) -> dict:
    return {"s": {"t": "i", "i": f"{IRI}{user}-{what}"},
            "p": {"t": "i", "i": f"{IRI}says"}, "o": {"t": "l", "v": f"{user} secret"}}


def librarian(operation: str, **fields) -> Callable[[], dict]:
    return lambda: {"operation": operation, "collection": "c", **fields}


def core_page(operation: str, part: str) -> Callable[[], dict]:
    return lambda: {"operation": operation, "part": part, "collection": "c"}


PROBES = [
    Probe("triples", "read", "triples", lambda: {"collection": "c"}, shows="{user}-mark"),
    Probe("subgraph", "read", "subgraph", lambda: {"collection": "c", "seeds": [
        {"t": "i", "i": f"{IRI}alice-mark"}, {"t": "i", "i": f"{IRI}bob-mark"}]}),
    Probe("graph-embeddings", "read", "graph-embeddings",
          lambda: {"collection": "c", "vector": [1.0, 1.0]}),
    Probe("document-embeddings", "read", "document-embeddings",
          lambda: {"collection": "c", "vector": [1.0, 1.0]}),
    Probe("lexical-search", "read", "lexical-search",
          lambda: {"collection": "c", "query": "secret"}),
    Probe("load-status", "read", "load-status",
          lambda: {"collection": "c", "documents": ["alice-doc", "bob-doc"]}),
    Probe("list-documents", "read", "librarian", librarian("list-documents"),
          shows="{user}-doc"),
    Probe("list-collections", "read", "librarian", librarian("list-collections")),
    Probe("get-document-content", "read", "librarian",
          librarian("get-document-content", document_id="alice-doc")),
    Probe("lazy-rag-status", "read", "lazy-rag-status", lambda: {}),
    Probe("lazy-rag-expand", "read", "lazy-rag-expand",
          lambda: {"collection": "c", "query": "secret"}),
    Probe("embeddings", "read", "embeddings", lambda: {"texts": ["x"]}, scoped=False),
    Probe("graph-rag", "ask", "graph-rag",
          lambda: {"collection": "c", "query": "[tokens=2] q"}, shows='"{user}/c/'),
    Probe("document-rag", "ask", "document-rag",
          lambda: {"collection": "c", "query": "[tokens=2] q", "streaming": True},
          shows='"{user}/c/'),
    Probe("agent", "ask", "agent", lambda: {"collection": "c", "question": "q",
                                            "session_id": "s"}),
    Probe("text-completion", "ask", "text-completion", lambda: {"prompt": "[tokens=2]"},
          scoped=False),
    Probe("prompt", "ask", "prompt", lambda: {"id": "no-such-template"}, scoped=False),
    Probe("text-load", "write", "text-load",
          lambda: {"collection": "c", "id": f"new-{uuid.uuid4().hex[:6]}", "text": "x"}),
    Probe("knowledge-load", "write", "knowledge-load", lambda: {
        "collection": "c", "source": "probe", "triples": [triple("probe", "new")]}),
    Probe("add-document", "write", "librarian", librarian(
        "add-document", document_id="probe-doc", content=base64.b64encode(b"x").decode())),
    Probe("remove-document", "write", "librarian",
          librarian("remove-document", document_id="no-such-doc")),
    Probe("begin-upload", "write", "librarian",
          librarian("begin-upload", document_id="probe-upload", size=10)),
    Probe("core-triples-export", "read", "core-triples",
          core_page("export", "triples"), shows="{user}-mark"),
    Probe("core-documents-count", "read", "core-documents",
          core_page("count", "documents")),
    Probe("core-vectors-export", "read", "core-vectors",
          core_page("export", "chunks")),
    Probe("core-triples-import", "write", "core-triples",
          core_page("import", "triples")),
    Probe("list-collections-managed", "read", "collection-management",
          lambda: {"operation": "list-collections"}),
    Probe("update-collection", "write", "collection-management",
          lambda: {"operation": "update-collection", "collection": "probe-set",
                   "name": "probe"}),
    Probe("delete-collection", "write", "collection-management",
          lambda: {"operation": "delete-collection", "collection": "probe-gone"}),
    Probe("config-get", "config", "config", lambda: {"operation": "list", "type": "prompt"},
          scoped=False),
    Probe("config-put", "admin", "config", lambda: {
        "operation": "put", "values": [{"type": "probe", "key": "k", "value": 1}]},
        scoped=False),
    Probe("list-keys", "admin", "keys", lambda: {"operation": "list-keys"}, scoped=False),
    Probe("create-key", "admin", "keys", lambda: {
        "operation": "create-key", "owner": "no-such-user", "role": "admin"}, scoped=False),
    Probe("verifiers", "internal", "keys", lambda: {"operation": "verifiers"}, scoped=False),
    Probe("record-use", "internal", "keys", lambda: {"operation": "record-use"}, scoped=False),
    # API routes (REST only)
    Probe("query", "ask", None, lambda: {"query": "[tokens=2] q", "collection": "c",
                                         "stream": True}, path="/api/v1/query",
          shows='"{user}/c/'),
    Probe("query-agent", "ask", None, lambda: {"query": "q", "mode": "agent",
                                               "collection": "c"}, path="/query"),
    Probe("lazy-query", "ask", None, lambda: {"query": "secret", "collection": "c"},
          path="/api/v1/lazy-rag/query"),
    Probe("lazy-expand", "read", None, lambda: {"query": "secret", "collection": "c"},
          path="/api/v1/lazy-rag/expand"),
    Probe("lazy-status", "read", None, dict, method="GET", path="/api/v1/lazy-rag/status"),
    Probe("core-export", "read", None, dict, method="GET",
          path="/api/v1/collections/c/core", shows="{user}-mark"),
    Probe("core-import", "write", None, dict, method="PUT",
          path="/api/v1/collections/c/core", upload=knowledge_core),
    # the services outside flows where TrustGraph's client asks them
    Probe("delete-collection-global", "write", None, lambda: {
        "operation": "delete-collection", "collection": "probe-gone", "workspace": "default"},
        path="/api/v1/collection-management"),
    Probe("config-put-global", "admin", None, lambda: {
        "operation": "put", "values": [{"type": "probe", "key": "k", "value": "1"}]},
        scoped=False, path="/api/v1/config"),
    Probe("metrics", "admin", None, dict, scoped=False, method="GET", path="/metrics"),
    Probe("whoami", "read", None, dict, scoped=False, method="GET", path="/api/v1/whoami",
          shows='"user": "{user}"'),
]


def expected(principal: str, target: str | None, probe: Probe) -> str:
    """What ``principal`` asking ``probe`` for ``target``'s data must get: "ok" (an
    answer, which may be the service's own error) or the error type of the refusal."""
    if principal == "none":
        return "auth-required"
    held = PRINCIPALS[principal]
    if held is None:
        return "auth-failed"
    user, role = held
    if probe.kind == "internal":
        return "forbidden"
    if probe.kind == "admin" and role != "admin":
        return "forbidden"
    if probe.kind in ("write", "config") and role == "reader":
        return "forbidden"
    if probe.scoped and target not in (None, user) and role != "admin":
        return "forbidden"
    return "ok"


# --- the clients ---------------------------------------------------------------------

@dataclass
class Outcome:
    status: int  # the HTTP status; over the websocket, that of the error type
    error: dict | None
    body: str


STATUS = {"auth-required": 401, "auth-failed": 401, "forbidden": 403}


class Socket:
    """One websocket for one principal: requests by id, answered concurrently."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.waiting: dict[str, tuple[asyncio.Future, list]] = {}
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self.ws:
            frame = json.loads(message.data)
            if frame.get("type") in ("auth-ok", "auth-failed"):
                continue
            done, frames = self.waiting[frame["id"]]
            frames.append(frame)
            if frame["complete"]:
                done.set_result(frames)

    async def ask(self, service: str, flow: str, request: dict) -> Outcome:
        request_id = uuid.uuid4().hex
        done = asyncio.get_running_loop().create_future()
        self.waiting[request_id] = (done, [])
        await self.ws.send_json({"id": request_id, "service": service, "flow": flow,
                                 "request": request})
        frames = await asyncio.wait_for(done, DEADLINE)
        error = frames[-1].get("error")
        status = STATUS.get(error["type"], 400) if error else 200
        return Outcome(status, error, json.dumps(frames))


async def over_rest(http, rig, probe: Probe, request: dict, key: str | None) -> Outcome:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if probe.service is not None:
        url = f"{rig.url}api/v1/flow/{rig.flow}/service/{probe.service}"
    else:
        url = rig.url + probe.path.lstrip("/")
    if probe.method == "GET":
        call = http.get(url, params=request, headers=headers)
    elif probe.upload is not None:
        call = http.request(probe.method, url, params=request, data=probe.upload(),
                            headers=headers)
    else:
        call = http.post(url, json=request, headers=headers)
    async with call as response:
        if response.content_type == "application/gzip":
            body = core_text(await response.read())
        else:
            body = await response.text()
        error = json.loads(body).get("error") if response.status >= 400 else None
        return Outcome(response.status, error, body)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rig(broker, tmp_path_factory):
    llm = await OpenAiServer().start()
    try:
        async with gateway_rig(broker.url, llm.base_url, tmp_path_factory.mktemp("tenancy"),
                               keys=True) as rig:
            yield rig
    finally:
        await llm.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def http(rig):
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=DEADLINE)) as http:
        yield http


def key_of(rig, principal: str) -> str | None:
    return {**rig.keys.by_name(), "unknown": UNKNOWN_KEY}.get(principal)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def data(rig, http):
    """Alice's and Bob's documents and triples, put there by the admin acting for them."""
    admin = {"Authorization": f"Bearer {rig.keys.admin}"}
    for user in ("alice", "bob"):
        for service, request in (
                ("librarian", {"operation": "add-document", "document_id": f"{user}-doc",
                               "user": user, "collection": "c", "title": f"{user}-doc",
                               "content": base64.b64encode(f"{user} secret".encode()
                                                           ).decode()}),
                ("knowledge-load", {"user": user, "collection": "c", "source": f"{user}-doc",
                                    "triples": [triple(user, "mark")]})):
            async with http.post(f"{rig.url}api/v1/flow/{rig.flow}/service/{service}",
                                 json=request, headers=admin) as response:
                assert response.status == 200, await response.text()
    await asyncio.sleep(max(0.0, rig.keys.expires_at - time.time()))  # the key's own end


@dataclass
class Results:
    cases: int = 0
    by_outcome: Counter = field(default_factory=Counter)
    wrong: list = field(default_factory=list)
    leaks: list = field(default_factory=list)
    unshown: list = field(default_factory=list)


def judge(results: Results, case: tuple, probe: Probe, outcome: Outcome) -> None:
    """``outcome`` against what it must be; what it shows against whose it may be."""
    principal, target, transport = case
    want = expected(principal, target, probe)
    kind = (outcome.error or {}).get("type")
    got = kind if kind in STATUS else "ok"  # an answer, or the service's own error
    results.cases += 1
    results.by_outcome[got] += 1
    if got != want or (got == "ok" and outcome.status >= 500 and outcome.status != 502):
        results.wrong.append((case, probe.name, want, outcome.status, outcome.body[:300]))
        return
    if got != "ok":
        message = outcome.error["message"]
        if outcome.status != STATUS[got] or not message:
            results.wrong.append((case, probe.name, "status/message", outcome.body[:300]))
        reason = {"revoked": "revoked", "expired": "expired"}.get(principal)
        if reason and reason not in message:
            results.wrong.append((case, probe.name, f"says {reason}", message))
        return
    if any(secret in outcome.body for secret in rig_secrets):
        results.leaks.append((case, probe.name, "a key's secret"))
    if probe.shows is None:
        return
    user, _ = PRINCIPALS[principal]
    acting = target if (target and probe.scoped) else user  # an admin's too: one user
    for other in (u for u in USERS if u != acting):
        if probe.shows.format(user=other) in outcome.body:
            results.leaks.append((case, probe.name, other))
    if acting in ("alice", "bob") or not probe.scoped:
        if probe.shows.format(user=acting) not in outcome.body:
            results.unshown.append((case, probe.name, outcome.body[:300]))


rig_secrets: list[str] = []


async def test_every_principal_on_every_route_and_transport(rig, http, data):
    rig_secrets.extend(rig.keys.by_name().values())
    results = Results()
    limit = asyncio.Semaphore(12)
    sockets: dict[str, Socket] = {}
    openers = (_socket_by_query, _socket_by_header, _socket_by_frame)
    for n, principal in enumerate(PRINCIPALS):
        sockets[principal] = Socket(await openers[n % 3](http, rig, key_of(rig, principal)))

    async def one(principal: str, target: str | None, probe: Probe, transport: str) -> None:
        request = probe.body()
        if probe.scoped and target is not None:
            request["user"] = target
        if probe.service is None and probe.scoped:  # an API route: on the rig's flow
            request["flow"] = rig.flow
        async with limit:
            if transport == "websocket":
                outcome = await sockets[principal].ask(probe.service, rig.flow, request)
            else:
                outcome = await over_rest(http, rig, probe, request, key_of(rig, principal))
        judge(results, (principal, target, transport), probe, outcome)

    cases = []
    for principal, held in PRINCIPALS.items():
        own = held[0] if held else None
        targets = {None, "alice", "bob", own} - ({own} if own == "root" else set())
        for target in sorted(targets, key=str):
            for probe in PROBES:
                for transport in ("websocket", "rest") if probe.service else ("rest",):
                    cases.append(one(principal, target, probe, transport))
    await asyncio.gather(*cases)
    for socket in sockets.values():
        await socket.ws.close()
    print(f"\ntenancy matrix: {results.cases} cases ({len(PRINCIPALS)} principals, "
          f"{len(PROBES)} probes, websocket and REST): {dict(results.by_outcome)}; "
          f"wrong {len(results.wrong)}, leaks {len(results.leaks)}")
    assert results.wrong == [], "\n".join(map(str, results.wrong))
    assert results.leaks == [], "\n".join(map(str, results.leaks))
    assert results.unshown == [], "\n".join(map(str, results.unshown))


async def _socket_by_query(http, rig, key):
    return await http.ws_connect(rig.socket_url, params={"token": key} if key else None)


async def _socket_by_header(http, rig, key):
    return await http.ws_connect(rig.socket_url, headers={
        "Authorization": f"Bearer {key}"} if key else None)


async def _socket_by_frame(http, rig, key):
    ws = await http.ws_connect(rig.socket_url)
    if key:
        await ws.send_json({"type": "auth", "token": key})
    return ws


async def test_a_revoked_key_is_refused_on_a_socket_already_open(rig, http, data):
    """Revocation reaches live sockets: each request is checked as it comes."""
    admin = {"Authorization": f"Bearer {rig.keys.admin}"}
    url = f"{rig.url}api/v1/flow/{rig.flow}/service/keys"
    async with http.post(url, json={"operation": "create-key", "owner": "bob"},
                         headers=admin) as response:
        made = await response.json()
    socket = Socket(await _socket_by_query(http, rig, made["secret"]))
    ask = {"collection": "c"}
    async with asyncio.timeout(DEADLINE):  # the new key's notice reaches the gateway
        while (await socket.ask("triples", rig.flow, ask)).status != 200:
            await asyncio.sleep(0.05)
    async with http.post(url, json={"operation": "revoke-key", "key_id": made["key"]["id"]},
                         headers=admin) as response:
        assert (await response.json())["key"]["revoked"] is not None
    async with asyncio.timeout(DEADLINE):  # the change notice reaches the gateway
        while (outcome := await socket.ask("triples", rig.flow, ask)).status == 200:
            await asyncio.sleep(0.05)
    assert outcome.error["type"] == "auth-failed" and "revoked" in outcome.error["message"]
    await socket.ws.close()


async def test_keys_are_never_readable(rig, http, data):
    """Not through config, not through the keys listing (ids and owners only)."""
    admin = {"Authorization": f"Bearer {rig.keys.admin}"}
    for service, request in (("config", {"operation": "config"}),
                             ("keys", {"operation": "list-keys"})):
        async with http.post(f"{rig.url}api/v1/flow/{rig.flow}/service/{service}",
                             json=request, headers=admin) as response:
            body = await response.text()
            assert response.status == 200, body
            assert not any(secret in body for secret in rig.keys.by_name().values())
            assert '"hash"' not in body and '"salt"' not in body
    listed = json.loads(body)["keys"]
    assert {k["user"] for k in listed} >= {"alice", "bob", "root"}


async def test_auth_ok_names_the_keys_user_as_the_default_workspace(rig, http, data):
    """A TrustGraph-style client sends back the workspace auth-ok named: it must be
    the key's user, or every request of a user's key would be refused."""
    async with http.ws_connect(rig.socket_url) as ws:
        await ws.send_json({"type": "auth", "token": rig.keys.alice})
        assert await ws.receive_json() == {"type": "auth-ok", "default_workspace": "alice"}
        await ws.send_json({"id": "w", "service": "triples", "flow": rig.flow,
                            "workspace": "alice", "request": {"collection": "c"}})
        answer = await ws.receive_json()
        assert "alice-mark" in json.dumps(answer) and "error" not in answer
        await ws.send_json({"type": "auth", "token": rig.keys.revoked})
        refused = await ws.receive_json()
        assert refused["type"] == "auth-failed" and "revoked" in refused["error"]
