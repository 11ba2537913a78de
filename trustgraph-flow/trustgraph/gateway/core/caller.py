"""Who a request comes from, once ``Auth.identify`` has decided it: a user and a
role, the key its limits and use count against, and how it was identified. Kept
apart from ``auth.py`` so that the credential checkers (keys, JWTs) and the auth
that uses them need not import each other."""
from dataclasses import dataclass
from typing import Literal

from trustgraph.schema import Role
from trustgraph.schema.pipeline import DEFAULT_USER

from .errors import GatewayError
from .limits import Limits

Via = Literal["key", "jwt", "token", "open", "public", "itself"]


@dataclass(frozen=True)
class Caller:
    user: str  # whose data a request acts for, unless it names another (admins only)
    role: Role | None  # None: nobody (a public route's caller may use no service)
    key_id: str | None = None  # what its limits and use count against; None: no limits
    via: Via = "key"
    limits: Limits = Limits()


PUBLIC = Caller("", None, via="public")  # the callers of public routes (page, documents)
OPEN = Caller(DEFAULT_USER, "admin", via="open")  # an open gateway's (loopback) callers
TOKEN_ADMIN = Caller(DEFAULT_USER, "admin", via="token")  # TG_GATEWAY_TOKEN's holder
# The gateway itself, reading shared configuration no key holds secret (which LLM
# answers) for a caller whose role may not read config.
ITSELF = Caller(DEFAULT_USER, "admin", via="itself")


def auth_failed(why: str = "") -> GatewayError:
    """401 ``auth-failed``; ``why`` is said only of a key whose secret was right."""
    return GatewayError("auth-failed", f"auth failure: {why}" if why else "auth failure",
                        401)
