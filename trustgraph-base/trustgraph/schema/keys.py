"""Users and their API keys (DESIGN §6): records of the ``keys`` service and the key
format.

The config processor keeps them in its SQLite store beside the configuration (never
as config items: no config read can return one). A key belongs to one user and has
one role; only a salted hash of it is stored, and its secret is answered once, by
``create-key``. The gateway keeps every key's verifier in memory (``verifiers``),
read again whenever a change notice (``ConfigNotify`` naming ``KEYS_CHANGED``) says
users or keys changed, and reports how keys were used in batches (``record-use``).

Operations of ``KeysRequest``:

===========  ==============================  =========================================
operation    request fields                  answer fields
===========  ==============================  =========================================
add-user     owner (the new user's name)     users (the one added)
list-users   (none)                          users
create-key   owner, role, name?, expires?,   key, secret (the key itself: shown once)
             limits?
list-keys    owner? (only that user's)       keys (never a secret or a hash)
revoke-key   key_id                          key (as revoked)
verifiers    (none)                          verifiers: the gateway's; not on its routes
record-use   uses, usage                     (nothing); the gateway's; not on its routes
usage        days, owner? (only that user's)  usage: LLM tokens per day, user, flow,
                                             model and key (``GET /api/v1/usage``)
===========  ==============================  =========================================

A key is ``tg_<id>_<secret>``: ``id`` (16 hex digits) names it in listings, logs and
revocation; the secret is 256 random bits. Being random, not chosen by a person, it
needs no slow hash to resist guessing: a salted SHA-256 is checked in a microsecond,
on every request, with no cache.
"""
import hashlib
import hmac
import re
import secrets
import time
from datetime import UTC, datetime
from typing import Literal, get_args

from pydantic import Field

from .record import Record, Response

# The keys service is outside flows, like config: asked on this flow only.
KEYS_FLOW = "default"
# What a ConfigNotify names after a change to users or keys (never a config type).
KEYS_CHANGED = "api-keys"

Role = Literal["admin", "user", "reader"]
ROLES: tuple[Role, ...] = get_args(Role)

KeysOperation = Literal["add-user", "list-users", "create-key", "list-keys", "revoke-key",
                        "verifiers", "record-use", "usage"]

USAGE_DAYS = 366  # days of LLM usage kept (UsageRow)

USER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")
KEY_PREFIX = "tg_"
_KEY = re.compile(r"^tg_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")


class KeyLimits(Record):
    """A key's limits; each unset one is the gateway's default (``TG_KEY_*``)."""

    concurrent: int | None = Field(default=None, ge=1)  # requests in flight at once
    per_minute: int | None = Field(default=None, ge=1)  # requests started per minute
    tokens_per_day: int | None = Field(default=None, ge=1)  # LLM tokens (in + out) per UTC day


class ApiKey(Record):
    """A key as listed: who it belongs to and what it may do, never its secret."""

    id: str
    user: str
    role: Role
    name: str = ""
    created: float = 0.0  # Unix seconds
    expires: float | None = None  # Unix seconds; None: never
    revoked: float | None = None  # when it was revoked; None: it was not
    last_used: float | None = None  # as last reported by a gateway (batched)
    limits: KeyLimits = KeyLimits()


class KeyVerifier(ApiKey):
    """A key as the gateway holds it: what it checks a presented key against, and
    the LLM tokens the key has used on ``day`` (UTC) as reported so far."""

    salt: str
    hash: str
    day: str = ""
    tokens_today: int = 0


class KeyUse(Record):
    """One gateway's report of a key's use since its last report."""

    id: str
    last_used: float
    day: str = ""  # the UTC date ``tokens`` were used on (YYYY-MM-DD)
    tokens: int = Field(default=0, ge=0)


class UsageRow(Record):
    """LLM tokens one user spent on one UTC day, flow and model, through one key
    (``""``: no key: the gateway's token, an open gateway, a JWT)."""

    day: str
    user: str
    flow: str = ""
    model: str = ""
    key: str = ""
    in_tokens: int = Field(default=0, ge=0)
    out_tokens: int = Field(default=0, ge=0)
    requests: int = Field(default=0, ge=0)


class UserInfo(Record):
    user: str
    created: float = 0.0


class KeysRequest(Record):
    operation: KeysOperation
    owner: str = ""  # add-user: the new user; create-key: whose key; list-keys: filter
    role: Role = "user"
    name: str = Field(default="", max_length=200)  # create-key: a label for people
    expires: float | None = None  # create-key: Unix seconds
    limits: KeyLimits = KeyLimits()
    key_id: str = ""  # revoke-key
    uses: list[KeyUse] = Field(default=[], max_length=10_000)  # record-use
    usage: list[UsageRow] = Field(default=[], max_length=10_000)  # record-use
    days: int = Field(default=1, ge=1, le=USAGE_DAYS)  # usage: today and the days before


class KeysResponse(Response):
    users: list[UserInfo] | None = None
    keys: list[ApiKey] | None = None
    key: ApiKey | None = None
    secret: str | None = None  # create-key only: the key to hand to its user
    verifiers: list[KeyVerifier] | None = None
    usage: list[UsageRow] | None = None
    end_of_stream: bool = True


def new_key() -> tuple[str, str]:
    """A fresh key: its id and the whole key (``tg_<id>_<secret>``)."""
    key_id = secrets.token_hex(8)
    return key_id, f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"


def key_id_of(token: str) -> str | None:
    """The id of a key in this format; None for anything else."""
    match = _KEY.match(token)
    return match.group(1) if match else None


def new_salt() -> str:
    return secrets.token_hex(16)


def key_digest(salt: str, key: str) -> str:
    return hashlib.sha256(bytes.fromhex(salt) + key.encode()).hexdigest()


def key_matches(key: str, salt: str, digest: str) -> bool:
    """Whether ``key`` is the one hashed to ``digest``, in constant time."""
    return hmac.compare_digest(key_digest(salt, key), digest)


def utc_day(offset: int = 0) -> str:
    """Today's date in UTC (``offset`` days later): the day a token budget counts."""
    return datetime.fromtimestamp(time.time() + offset * 86400, UTC).date().isoformat()
