"""Who is asking: decided in one place, ``Auth.identify``, for every HTTP route and
every websocket request (from the key it was opened with, or its auth frame), and
never from a request's body.

A credential is one of: an API key (``tg_<id>_<secret>``, checked against the keys
held in memory, ``KeyRing``), a JWT from the deployment's identity provider (when a
verification key is configured, ``JwtVerifier``), or the gateway's own token
(``TG_GATEWAY_TOKEN``: the admin of a single-user installation). Each names one
user and one role (``Caller``); ``access.authorize`` then decides what that caller
may do.

With none of them configured (no token, no JWT key, and not one API key ever
created) the gateway is open, to loopback callers only: they are its admin.
"""
import hmac
import ipaddress
from typing import TYPE_CHECKING

from aiohttp import web

from trustgraph.schema.keys import KEY_PREFIX

from .caller import OPEN, TOKEN_ADMIN, Caller, auth_failed
from .errors import GatewayError

if TYPE_CHECKING:
    from .jwt_auth import JwtVerifier
    from .keyring import KeyRing

REQUIRED = "this gateway needs a key: Authorization: Bearer <key> or ?token=<key>"
LOOPBACK_ONLY = ("this gateway is open (no TG_GATEWAY_TOKEN, no JWT key, no API key "
                 "created), so it answers on loopback only; create a key (tg-add-user, "
                 "tg-create-key) or set TG_GATEWAY_TOKEN to use it from elsewhere")


class Auth:
    def __init__(self, token: str, keys: "KeyRing | None" = None,
                 jwt: "JwtVerifier | None" = None) -> None:
        self._token = token.encode()
        self._keys = keys
        self._jwt = jwt

    @property
    def open(self) -> bool:
        """No credential of any kind configured."""
        return not self._token and self._jwt is None and (
            self._keys is None or self._keys.empty)

    def identify(self, token: object, required: str = REQUIRED,
                 peer: str | None = None) -> Caller:
        """The caller presenting ``token`` (None: nothing presented) from ``peer``
        (its address; None: not known), or the 401 saying why not (``required``: how
        to present one)."""
        if self.open:
            if peer and not _loopback(peer):
                raise GatewayError("auth-required", LOOPBACK_ONLY, 401)
            return OPEN
        if token is None:
            if self._keys is not None and not self._token and self._jwt is None:
                self._keys.check_ready()  # no key yet read: not yet known to be open
            raise GatewayError("auth-required", required, 401)
        if not isinstance(token, str):
            raise auth_failed()
        if self._token and hmac.compare_digest(token.encode(), self._token):
            return TOKEN_ADMIN
        if self._keys is not None and token.startswith(KEY_PREFIX):
            return self._keys.identify(token)
        if self._jwt is not None and token.count(".") == 2:
            return self._jwt.identify(token)
        raise auth_failed()


def _loopback(peer: str) -> bool:
    try:
        address = ipaddress.ip_address(peer.split("%")[0])
    except ValueError:
        return False  # not an IP address: not known to be this machine
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1
    return (mapped or address).is_loopback


def presented_token(request: web.Request) -> str | None:
    """The token from ``?token=`` or ``Authorization: Bearer``, if either is there."""
    if "token" in request.query:
        return request.query["token"]
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        return credentials.strip()
    return None


async def whoami(request: web.Request, caller: Caller) -> web.Response:
    """``GET /api/v1/whoami``: who the gateway takes the caller to be."""
    return web.json_response({"user": caller.user, "role": caller.role,
                              "key_id": caller.key_id if caller.via == "key" else None,
                              "via": caller.via})
