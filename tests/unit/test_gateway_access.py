"""Who may do what, decided without a broker: the service rows' permissions and
``authorize`` (the user a request acts for), the per-key limits, JWT verification,
and the role table in docs/gateway.md kept in step with the rows."""
import base64
import hashlib
import hmac
import json
import re
import time
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from trustgraph.gateway.app import GatewaySettings
from trustgraph.gateway.core import Core
from trustgraph.gateway.core.access import allowed, may
from trustgraph.gateway.core.access import authorize as authorize_row
from trustgraph.gateway.core.auth import Auth
from trustgraph.gateway.core.caller import OPEN, TOKEN_ADMIN, Caller
from trustgraph.gateway.core.errors import GatewayError
from trustgraph.gateway.core.jwt_auth import JwtSettings, JwtVerifier
from trustgraph.gateway.core.keyring import KeyRing
from trustgraph.gateway.core.limits import Limiter, Limits
from trustgraph.gateway.core.permissions import EVERYONE, READ, WRITE
from trustgraph.gateway.core.services import SERVICES, ServiceRow
from trustgraph.schema import (
    ROLES,
    ConfigRequest,
    CoreRequest,
    CoreResponse,
    GraphRagRequest,
    KeysRequest,
    LibrarianRequest,
    LoadResponse,
    TextCompletionRequest,
    TextLoadRequest,
)

ALICE = Caller("alice", "user", "k-alice")
READER = Caller("rita", "reader", "k-rita")
ADMIN = Caller("root", "admin", "k-root")
DOCS = Path(__file__).parents[2] / "docs" / "gateway.md"


def authorize(caller, service, record):
    return authorize_row(caller, SERVICES[service], record)


def refused(caller, service, record) -> GatewayError:
    with pytest.raises(GatewayError) as failure:
        authorize(caller, service, record)
    return failure.value


def test_a_request_acts_for_the_callers_user():
    record, needs = authorize(ALICE, "graph-rag", GraphRagRequest(query="q"))
    assert record.user == "alice" and needs.llm
    named, _ = authorize(ALICE, "graph-rag", GraphRagRequest(query="q", user="alice"))
    assert named.user == "alice"
    for caller in (ALICE, READER):
        error = refused(caller, "graph-rag", GraphRagRequest(query="q", user="bob"))
        assert (error.type, error.status) == ("forbidden", 403)
        assert "'bob'" in error.message
    # the default user named explicitly is another user like any other
    assert refused(ALICE, "graph-rag", GraphRagRequest.model_validate(
        {"query": "q", "user": "trustgraph"})).status == 403


def test_an_admin_acts_for_others_and_says_so(caplog):
    caplog.set_level("INFO")
    record, _ = authorize(ADMIN, "text-load", TextLoadRequest(id="d", text="t", user="bob"))
    assert record.user == "bob" and "acts for user 'bob'" in caplog.text
    assert authorize(ADMIN, "text-load", TextLoadRequest(id="d", text="t"))[0].user == "root"
    assert "k-root" in caplog.text and "tg_" not in caplog.text


def test_roles():
    load = TextLoadRequest(id="d", text="t")
    assert authorize(ALICE, "text-load", load)[0].user == "alice"
    assert refused(READER, "text-load", load).message == "role 'reader' may not use text-load"
    remove = LibrarianRequest(operation="remove-document", document_id="d")
    listing = LibrarianRequest(operation="list-documents")
    assert refused(READER, "librarian", remove).status == 403
    assert authorize(READER, "librarian", listing)[0].user == "rita"
    put = ConfigRequest(operation="put")
    assert refused(ALICE, "config", put).message == "role 'user' may not use config put"
    assert authorize(ALICE, "config", ConfigRequest(operation="get"))
    assert refused(READER, "config", ConfigRequest(operation="get")).status == 403
    assert authorize(ADMIN, "config", put)
    for operation in ("create-key", "list-keys", "revoke-key", "add-user"):
        assert refused(ALICE, "keys", KeysRequest(operation=operation)).status == 403
        assert authorize(ADMIN, "keys", KeysRequest(operation=operation))
    for internal in ("verifiers", "record-use"):  # the bus's own, never the gateway's
        assert refused(ADMIN, "keys", KeysRequest(operation=internal)).status == 403
    assert authorize(READER, "text-completion", TextCompletionRequest(prompt="p"))
    assert refused(Caller("", None, via="public"), "text-completion",
                   TextCompletionRequest(prompt="p")).status == 403
    assert not may(ADMIN, "no-such-service") and authorize(OPEN, "keys",
                                                          KeysRequest(operation="list-keys"))


def test_allowed_lists_what_a_role_may():
    reader = allowed("reader")
    assert "text-load" not in reader and reader["graph-rag"] is None
    assert reader["librarian"] == frozenset({
        "list-documents", "list-collections", "get-document-metadata",
        "get-document-content"})
    assert "keys" not in allowed("user") and "put" not in allowed("user")["config"]
    assert allowed("admin")["keys"] == frozenset({
        "add-user", "list-users", "create-key", "list-keys", "revoke-key", "usage"})
    assert allowed(None) == {}


def test_a_row_names_a_permission_for_each_operation_its_record_declares():
    pages = {"count": READ, "export": READ}
    with pytest.raises(TypeError, match="missing import"):
        ServiceRow("core-test", CoreRequest, CoreResponse, pages)
    with pytest.raises(TypeError, match="not declared by CoreRequest: purge"):
        ServiceRow("core-test", CoreRequest, CoreResponse,
                   {**pages, "import": WRITE, "purge": WRITE})
    with pytest.raises(TypeError, match="one for each of its operations"):
        ServiceRow("core-test", CoreRequest, CoreResponse, READ)
    with pytest.raises(TypeError, match="not declared by TextLoadRequest: load"):
        ServiceRow("load-test", TextLoadRequest, LoadResponse, {"load": WRITE})
    row = ServiceRow("core-test", CoreRequest, CoreResponse, {**pages, "import": WRITE})
    assert row.permission("import") == WRITE and row.permission("purge").roles == set()


def test_the_role_table_in_the_docs_is_the_codes():
    """docs/gateway.md's table: one row per service (or service operation) and a
    column per role, ✓ where the role may."""
    text = DOCS.read_text()
    section = text[text.index("<!-- roles -->"):text.index("<!-- /roles -->")]
    documented = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 1 + len(ROLES) or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`([^`]+)`", cells[0])
        for name in names:
            documented[name] = frozenset(role for role, cell in zip(ROLES, cells[1:], strict=True)
                                         if cell == "✓")
    expected = {f"{row.name} {operation}" if operation else row.name: needs.roles
                for row in SERVICES.values()
                for operation, needs in row.permissions().items()}
    core = Core(None, GatewaySettings(tg_gateway_keys=False))
    for route in core.routes:  # the routes of some roles only (the rest: by service)
        if route.roles != EVERYONE:
            expected[f"{route.method} {route.path}"] = route.roles
    assert documented == expected
    header = next(line for line in section.splitlines() if line.startswith("|"))
    assert [cell.strip() for cell in header.strip("|").split("|")][1:] == list(ROLES)


def test_per_key_limits():
    limiter = Limiter()
    limits = Limits(concurrent=2, per_minute=3)
    first = limiter.admit("k", limits, llm=False)
    limiter.admit("k", limits, llm=False)
    with pytest.raises(GatewayError) as failure:
        limiter.admit("k", limits, llm=False)
    assert (failure.value.type, failure.value.status, failure.value.retry_after) == (
        "rate-limited", 429, 1)
    limiter.release(first, 0)
    limiter.admit("k", limits, llm=False)  # the third of the minute
    limiter.release(first, 0)
    with pytest.raises(GatewayError) as failure:
        limiter.admit("k", limits, llm=False)
    assert "3 requests a minute" in failure.value.message
    assert 1 <= failure.value.retry_after <= 20  # one request's worth of the minute
    assert limiter.admit("other", limits, llm=False) is not None  # each key its own
    assert limiter.admit(None, Limits(concurrent=0), llm=True) is None  # no key, no limit


def test_a_days_tokens_are_refused_before_the_llm_is_asked():
    limiter = Limiter()
    limits = Limits(tokens_per_day=100)
    limiter.reported("k", time.strftime("%Y-%m-%d", time.gmtime()), 60)
    meter = limiter.admit("k", limits, llm=True)
    limiter.release(meter, 45)
    assert limiter.admit("k", limits, llm=False)  # what calls no LLM still may
    with pytest.raises(GatewayError) as failure:
        limiter.admit("k", limits, llm=True)
    assert "100 LLM tokens for today" in failure.value.message
    assert 0 < failure.value.retry_after <= 86400
    use, = limiter.uses({"k"})
    assert (use.id, use.tokens) == ("k", 45) and limiter.uses({"k"}) == []


# --- JWTs ------------------------------------------------------------------------------

ISSUER, AUDIENCE = "https://id.example.org", "trustgraph"


def claims(**overrides):
    now = int(time.time())
    return {"sub": "alice", "role": "user", "iss": ISSUER, "aud": AUDIENCE,
            "iat": now, "exp": now + 300, **overrides}


def verifier(path: Path, algorithms=("RS256", "ES256")) -> JwtVerifier:
    return JwtVerifier(JwtSettings(str(path), algorithms, ISSUER, AUDIENCE),
                       Limits(per_minute=10))


@pytest.fixture(scope="module")
def rsa_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_pem(key) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)


def failure_of(verify: JwtVerifier, token: str) -> str:
    with pytest.raises(GatewayError) as failure:
        verify.identify(token)
    assert (failure.value.type, failure.value.status) == ("auth-failed", 401)
    return failure.value.message


def test_a_jwt_names_the_user_and_role(tmp_path, rsa_key):
    (tmp_path / "key.pem").write_bytes(public_pem(rsa_key))
    verify = verifier(tmp_path / "key.pem")
    caller = verify.identify(jwt.encode(claims(), rsa_key, algorithm="RS256"))
    assert (caller.user, caller.role, caller.via, caller.key_id) == (
        "alice", "user", "jwt", "jwt:alice")
    assert caller.limits == Limits(per_minute=10)
    assert "expired" in failure_of(verify, jwt.encode(
        claims(exp=int(time.time()) - 60), rsa_key, algorithm="RS256"))
    for wrong in ({"aud": "other"}, {"iss": "https://evil.example.org"}, {"role": "root"},
                  {"sub": ""}):
        failure_of(verify, jwt.encode(claims(**wrong), rsa_key, algorithm="RS256"))
    no_exp = claims()
    del no_exp["exp"]
    failure_of(verify, jwt.encode(no_exp, rsa_key, algorithm="RS256"))
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    failure_of(verify, jwt.encode(claims(), other, algorithm="RS256"))
    # the public key as an HMAC secret: the token may not choose its algorithm
    failure_of(verify, _forged_hs256(public_pem(rsa_key)))


def _forged_hs256(secret: bytes) -> str:
    """An HS256 token signed with ``secret`` by hand, as an attacker holding the
    public key would (PyJWT refuses to make one with a PEM key)."""
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64(json.dumps(claims()).encode())
    signature = hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(signature)}"


def test_a_jwks_file_picks_the_key_by_kid(tmp_path, rsa_key):
    ec_key = ec.generate_private_key(ec.SECP256R1())
    jwks = {"keys": [
        {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rsa_key.public_key())),
         "kid": "r1", "use": "sig"},
        {**json.loads(jwt.algorithms.ECAlgorithm.to_jwk(ec_key.public_key())),
         "kid": "e1", "use": "sig"}]}
    (tmp_path / "jwks.json").write_text(json.dumps(jwks))
    verify = verifier(tmp_path / "jwks.json")
    assert verify.identify(jwt.encode(claims(), rsa_key, "RS256", headers={"kid": "r1"})
                           ).user == "alice"
    assert verify.identify(jwt.encode(claims(role="admin"), ec_key, "ES256",
                                      headers={"kid": "e1"})).role == "admin"
    failure_of(verify, jwt.encode(claims(), ec_key, "ES256", headers={"kid": "r1"}))
    failure_of(verify, jwt.encode(claims(), ec_key, "ES256", headers={"kid": "zz"}))


def test_an_hs256_secret_and_the_settings_it_needs(tmp_path):
    secret = b"s" * 40
    (tmp_path / "secret").write_bytes(secret)
    verify = verifier(tmp_path / "secret", ("HS256",))
    assert verify.identify(jwt.encode(claims(role="reader"), secret, "HS256")).role == "reader"
    with pytest.raises(ValueError):
        verifier(tmp_path / "secret")  # a shared secret is for HS256 alone
    (tmp_path / "short").write_bytes(b"short")
    with pytest.raises(ValueError):
        verifier(tmp_path / "short", ("HS256",))
    with pytest.raises(ValueError):
        JwtVerifier(JwtSettings(str(tmp_path / "secret"), ("HS256",), "", ""), Limits())


def test_an_open_gateway_answers_this_machine_only():
    auth = Auth("")
    for peer in ("127.0.0.1", "::1", "::ffff:127.0.0.1", None, ""):
        assert auth.identify(None, peer=peer) == OPEN
    for peer in ("10.1.2.3", "192.168.0.7", "fe80::1", "not-an-address"):
        with pytest.raises(GatewayError) as failure:
            auth.identify("anything", peer=peer)
        assert (failure.value.type, failure.value.status) == ("auth-required", 401)
        assert "loopback" in failure.value.message and "tg-create-key" in failure.value.message


def test_until_the_keys_are_read_nothing_is_taken_to_be_open():
    keys = KeyRing(None, "gateway-test", Limiter(), Limits())
    auth = Auth("", keys)
    assert not auth.open
    for token in (None, "tg_0123456789abcdef_" + "A" * 43):
        with pytest.raises(GatewayError) as failure:
            auth.identify(token, peer="127.0.0.1")
        assert (failure.value.type, failure.value.status) == ("auth-unavailable", 503)
        assert failure.value.retry_after
    assert Auth("admin-secret", keys).identify("admin-secret") == TOKEN_ADMIN
