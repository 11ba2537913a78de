"""Optional JWTs from a deployment's own identity provider: verified with a key read
once from a file (``TG_JWT_KEY_FILE``: a PEM public key, a JWKS or one JWK, or for
HS256 the shared secret), never fetched: no network call at verification.

The token must be signed with one of ``TG_JWT_ALGORITHMS`` (RS256, ES256 or HS256;
a public key never verifies an HMAC, so a token cannot pick its own algorithm),
unexpired (``exp`` required), from ``TG_JWT_ISSUER`` and for ``TG_JWT_AUDIENCE``.
``TG_JWT_USER_CLAIM`` (``sub``) names the user, ``TG_JWT_ROLE_CLAIM`` (``role``)
the role. A verified token is remembered until it expires (a websocket presents
its token on every request), so each is verified once.
"""
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt

from trustgraph.schema import ROLES

from .caller import Caller, auth_failed
from .limits import Limits

log = logging.getLogger(__name__)

ALGORITHMS = ("RS256", "ES256", "HS256")
LEEWAY = 10.0  # seconds of clock difference allowed on exp, nbf, iat
REMEMBERED = 4096  # verified tokens kept; past that the memory starts again


@dataclass(frozen=True)
class JwtSettings:
    key_file: str
    algorithms: tuple[str, ...]
    issuer: str
    audience: str
    user_claim: str = "sub"
    role_claim: str = "role"


class JwtVerifier:
    def __init__(self, settings: JwtSettings, limits: Limits) -> None:
        unknown = set(settings.algorithms) - set(ALGORITHMS)
        if unknown or not settings.algorithms:
            raise ValueError(f"TG_JWT_ALGORITHMS: {', '.join(sorted(unknown)) or 'none'}; "
                             f"supported: {', '.join(ALGORITHMS)}")
        if not (settings.issuer and settings.audience):
            raise ValueError("a JWT key needs TG_JWT_ISSUER and TG_JWT_AUDIENCE: a token "
                             "minted for another service must not be taken here")
        self.settings = settings
        self._limits = limits
        self._keys = _read_keys(Path(settings.key_file), settings.algorithms)
        self._verified: dict[str, tuple[Caller, float]] = {}

    def identify(self, token: str) -> Caller:
        remembered = self._verified.get(token)
        if remembered is not None and time.time() < remembered[1]:
            return remembered[0]
        claims = self._claims(token)
        user, role = claims.get(self.settings.user_claim), claims.get(self.settings.role_claim)
        if not isinstance(user, str) or not user:
            raise auth_failed(f"the token has no {self.settings.user_claim!r} claim")
        if role not in ROLES:
            raise auth_failed(f"the token's {self.settings.role_claim!r} claim must be one "
                              f"of {', '.join(ROLES)}")
        caller = Caller(user, role, f"jwt:{user}", "jwt", self._limits)
        if len(self._verified) >= REMEMBERED:
            self._verified.clear()
        self._verified[token] = caller, float(claims["exp"])
        return caller

    def _claims(self, token: str) -> dict[str, Any]:
        try:
            key = self._key(jwt.get_unverified_header(token))
            return jwt.decode(token, key, algorithms=list(self.settings.algorithms),
                              audience=self.settings.audience, issuer=self.settings.issuer,
                              leeway=LEEWAY, options={"require": ["exp", "iss", "aud"]})
        except jwt.ExpiredSignatureError:
            raise auth_failed("the token has expired") from None
        except jwt.PyJWTError as error:
            raise auth_failed(f"the token was not accepted: {error}") from None

    def _key(self, header: dict[str, Any]) -> Any:
        """The key for the token's ``kid`` (a JWKS), or the one key there is."""
        if len(self._keys) == 1 and header.get("kid") in (None, *self._keys):
            return next(iter(self._keys.values()))
        key = self._keys.get(header.get("kid"))
        if key is None:
            raise jwt.InvalidKeyError("no key of the JWKS has the token's kid")
        return key


def _read_keys(path: Path, algorithms: tuple[str, ...]) -> dict[str | None, Any]:
    """The verification keys in ``path`` by key id (None: the one key of a file that
    names none)."""
    data = path.read_bytes()
    text = data.strip()
    if text.startswith(b"{"):
        document = json.loads(text)
        found = jwt.PyJWKSet.from_dict(document).keys if "keys" in document \
            else [jwt.PyJWK.from_dict(document)]
        return {key.key_id: key for key in found}
    if text.startswith(b"-----BEGIN"):
        if "HS256" in algorithms:
            raise ValueError(f"{path} is a public key: TG_JWT_ALGORITHMS may not include "
                             f"HS256 with it")
        return {None: text}
    if algorithms != ("HS256",):
        raise ValueError(f"{path}: neither a PEM key nor a JWKS; a shared secret is for "
                         f"TG_JWT_ALGORITHMS=HS256 alone")
    if len(text) < 32:
        raise ValueError(f"{path}: an HS256 secret needs at least 32 bytes")
    return {None: text}
