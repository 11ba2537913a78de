"""The gateway's bearer token: open when none is configured; compared in constant time."""
import hmac

from aiohttp import web

from .errors import GatewayError


class Auth:
    def __init__(self, token: str) -> None:
        self._token = token.encode()

    @property
    def open(self) -> bool:
        return not self._token

    def accepts(self, token: object) -> bool:
        if self.open:
            return True
        if not isinstance(token, str):
            return False
        return hmac.compare_digest(token.encode(), self._token)

    def check(self, request: web.Request) -> None:
        """Raise the auth error for an HTTP request that carries no valid token."""
        if self.open:
            return
        token = presented_token(request)
        if token is None:
            raise GatewayError("auth-required", "this gateway needs a token: "
                               "Authorization: Bearer <token> or ?token=<token>", 401)
        if not self.accepts(token):
            raise GatewayError("auth-failed", "auth failure", 401)


def presented_token(request: web.Request) -> str | None:
    """The token from ``?token=`` or ``Authorization: Bearer``, if either is there."""
    if "token" in request.query:
        return request.query["token"]
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        return credentials.strip()
    return None
