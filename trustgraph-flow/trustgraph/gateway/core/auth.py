"""Who is asking: decided in one place, ``Auth.identify``, for every HTTP route and
every websocket (from the token it was opened with, or its auth frame).

Today the credential is one bearer token for the whole gateway (none configured: the
gateway is open), compared in constant time. It names nobody in particular, so a
caller that holds it may ask anything; keys naming a user and a role (DESIGN §6)
would be told apart here, and ``Caller`` would carry what they name.
"""
import hmac
from dataclasses import dataclass

from aiohttp import web

from .errors import GatewayError


@dataclass(frozen=True)
class Caller:
    verified: bool  # presented the gateway's token (False: none needed, or a public route)


ANYONE = Caller(verified=False)  # an open gateway's callers, and public routes'
REQUIRED = "this gateway needs a token: Authorization: Bearer <token> or ?token=<token>"


class Auth:
    def __init__(self, token: str) -> None:
        self._token = token.encode()

    @property
    def open(self) -> bool:
        return not self._token

    def identify(self, token: object, required: str = REQUIRED) -> Caller:
        """The caller presenting ``token`` (None: nothing presented), or the 401
        saying why not (``required``: how to present one)."""
        if self.open:
            return ANYONE
        if token is None:
            raise GatewayError("auth-required", required, 401)
        if not isinstance(token, str) or not hmac.compare_digest(token.encode(), self._token):
            raise GatewayError("auth-failed", "auth failure", 401)
        return Caller(verified=True)


def presented_token(request: web.Request) -> str | None:
    """The token from ``?token=`` or ``Authorization: Bearer``, if either is there."""
    if "token" in request.query:
        return request.query["token"]
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        return credentials.strip()
    return None
