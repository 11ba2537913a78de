"""Users and their API keys (an admin's key, or an open gateway, is needed):

* ``tg-add-user USER``
* ``tg-create-key --user USER --role admin|user|reader [--expires 30d] [--name N]
  [--concurrent N] [--per-minute N] [--tokens-per-day N]``: prints the key, once
* ``tg-list-keys [--user USER]``: ids, owners, roles, dates, limits; never a key
* ``tg-revoke-key KEY_ID``
"""
import argparse
import re
import sys
import time
from datetime import UTC, datetime

from .common import columns, connect, parser, positive, print_json, run

ROLES = ("admin", "user", "reader")
DURATION = re.compile(r"^(\d+)([smhdw])$")
SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
COLUMNS = ("id", "user", "role", "name", "created (UTC)", "expires", "revoked", "last used",
           "limits")


def expiry(text: str) -> float:
    """An ``argparse`` type: ``30d`` (s, m, h, d, w from now), a date or date-time
    (ISO 8601, UTC unless it says), or Unix seconds."""
    if match := DURATION.match(text):
        return time.time() + int(match.group(1)) * SECONDS[match.group(2)]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a duration (30d, 12h), a date (2027-01-31) or Unix seconds"
        ) from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def shown(when: float | None) -> str:
    if when is None:
        return "-"
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d %H:%M")


def row(key: dict) -> tuple[str, ...]:
    limits = ",".join(f"{name}={value}" for name, value in (key.get("limits") or {}).items()
                      if value is not None) or "-"
    return (key["id"], key["user"], key["role"], key.get("name") or "",
            shown(key.get("created")), shown(key.get("expires")), shown(key.get("revoked")),
            shown(key.get("last_used")), limits)


# --- the commands --------------------------------------------------------------------

def add_user_main(argv: list[str] | None = None) -> int:
    prog = "tg-add-user"
    arguments = parser(prog, "Add a user, who may then be given API keys.", flow=False)
    arguments.add_argument("user", help="the user's name (letters, digits, ._@-)")
    args = arguments.parse_args(argv)

    async def add() -> None:
        async with connect(args) as client:
            await client.add_user(args.user)
        print(f"added user {args.user}", flush=True)

    return run(prog, add())


def create_key_main(argv: list[str] | None = None) -> int:
    prog = "tg-create-key"
    arguments = parser(prog, "Create an API key for a user. The key is printed once, on "
                             "stdout; only a salted hash of it is kept.", flow=False)
    arguments.add_argument("--user", required=True, help="whose key (tg-add-user first)")
    arguments.add_argument("--role", required=True, choices=ROLES,
                           help="admin: everything; user: its own data; reader: ask and "
                                "search its own data")
    arguments.add_argument("--expires", type=expiry, default=None,
                           help="30d, 12h, a date (2027-01-31) or Unix seconds; default never")
    arguments.add_argument("--name", default="", help="a label, e.g. the machine it is for")
    for flag, what in (("--concurrent", "requests in flight at once"),
                       ("--per-minute", "requests started per minute"),
                       ("--tokens-per-day", "LLM tokens (in + out) per UTC day")):
        arguments.add_argument(flag, type=positive, default=None,
                               help=f"{what} (default: the gateway's TG_KEY_* setting)")
    args = arguments.parse_args(argv)
    limits = {"concurrent": args.concurrent, "per_minute": args.per_minute,
              "tokens_per_day": args.tokens_per_day}

    async def create() -> None:
        async with connect(args) as client:
            made = await client.create_key(args.user, args.role, name=args.name,
                                           expires=args.expires, limits=limits)
        key = made["key"]
        print(f"key {key['id']} for {key['user']} ({key['role']}), expires "
              f"{shown(key.get('expires'))}: it is shown this once", file=sys.stderr)
        print(made["secret"], flush=True)

    return run(prog, create())


def list_keys_main(argv: list[str] | None = None) -> int:
    prog = "tg-list-keys"
    arguments = parser(prog, "List API keys: who holds each, its role, dates and limits "
                             "(never the key itself).", flow=False)
    arguments.add_argument("--user", default=None, help="only this user's keys")
    arguments.add_argument("--json", action="store_true", help="as JSON")
    args = arguments.parse_args(argv)

    async def show() -> None:
        async with connect(args) as client:
            keys = await client.list_keys(args.user)
        if args.json:
            print_json(keys)
        elif keys:
            print(columns([row(key) for key in keys], COLUMNS), flush=True)
        else:
            print("no keys", flush=True)

    return run(prog, show())


def revoke_key_main(argv: list[str] | None = None) -> int:
    prog = "tg-revoke-key"
    arguments = parser(prog, "Revoke an API key: refused from the next request on, "
                             "open websockets included.", flow=False)
    arguments.add_argument("key_id", metavar="KEY_ID", help="as tg-list-keys shows it")
    args = arguments.parse_args(argv)

    async def revoke() -> None:
        async with connect(args) as client:
            key = await client.revoke_key(args.key_id)
        print(f"revoked {key['id']} ({key['user']}, {key['role']})", flush=True)

    return run(prog, revoke())
