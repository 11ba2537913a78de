"""Users and API keys in the config processor's SQLite file, in tables of their own:
no config operation reads them, and their changes leave the config version alone.

A key is stored as its id, owner, role, limits and dates, and a salted SHA-256 of
the key (``trustgraph.schema.keys``); the key itself is returned once, by
``create_key``, and kept nowhere. How much each key was used is reported by the
gateways in batches (``record_use``): when it was last used, and LLM tokens per day.
"""
import json
import sqlite3
import time
from pathlib import Path

from trustgraph.base import BadRequest, HandledError
from trustgraph.schema.keys import (
    USAGE_DAYS,
    USER_NAME,
    ApiKey,
    KeyLimits,
    KeyUse,
    KeyVerifier,
    Role,
    UsageRow,
    UserInfo,
    key_digest,
    new_key,
    new_salt,
    utc_day,
)
from trustgraph.sqlite_transaction import SqliteFile

SCHEMA = """
CREATE TABLE IF NOT EXISTS api_user (
    user    TEXT PRIMARY KEY,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS api_key (
    id        TEXT PRIMARY KEY,
    user      TEXT NOT NULL REFERENCES api_user (user),
    role      TEXT NOT NULL,
    name      TEXT NOT NULL,
    salt      TEXT NOT NULL,
    hash      TEXT NOT NULL,
    limits    TEXT NOT NULL,
    created   REAL NOT NULL,
    expires   REAL,
    revoked   REAL,
    last_used REAL
);
CREATE TABLE IF NOT EXISTS llm_usage (
    day        TEXT NOT NULL,
    user       TEXT NOT NULL,
    flow       TEXT NOT NULL,
    model      TEXT NOT NULL,
    key        TEXT NOT NULL,
    in_tokens  INTEGER NOT NULL,
    out_tokens INTEGER NOT NULL,
    requests   INTEGER NOT NULL,
    PRIMARY KEY (day, user, flow, model, key)
);
CREATE TABLE IF NOT EXISTS api_key_tokens (
    id     TEXT NOT NULL,
    day    TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    PRIMARY KEY (id, day)
);
"""
_KEY_COLUMNS = "id, user, role, name, limits, created, expires, revoked, last_used"


class KeyStore:
    def __init__(self, path: str | Path) -> None:
        self._db = SqliteFile(path, SCHEMA)

    def add_user(self, user: str) -> UserInfo:
        if not USER_NAME.match(user):
            raise BadRequest(f"owner: {user!r} is not a user name (letters, digits and "
                             f"._@- up to 128, starting with a letter or digit)")
        added = UserInfo(user=user, created=time.time())
        with self._db.transaction(write=True) as db:
            try:
                db.execute("INSERT INTO api_user (user, created) VALUES (?, ?)",
                           (user, added.created))
            except sqlite3.IntegrityError:
                raise HandledError("conflict", f"user {user!r} exists already") from None
        return added

    def users(self) -> list[UserInfo]:
        with self._db.transaction() as db:
            return [UserInfo(user=user, created=created) for user, created in db.execute(
                "SELECT user, created FROM api_user ORDER BY user")]

    def create_key(self, user: str, role: Role, name: str = "", expires: float | None = None,
                   limits: KeyLimits | None = None) -> tuple[ApiKey, str]:
        """A new key for ``user`` (who must exist): its listing, and the key itself."""
        now = time.time()
        if expires is not None and expires <= now:
            raise BadRequest("expires: must be in the future (Unix seconds)")
        key_id, key = new_key()
        salt = new_salt()
        created = ApiKey(id=key_id, user=user, role=role, name=name, created=now,
                         expires=expires, limits=limits or KeyLimits())
        with self._db.transaction(write=True) as db:
            if db.execute("SELECT 1 FROM api_user WHERE user = ?", (user,)).fetchone() is None:
                raise HandledError("not-found", f"no user {user!r}: add it first "
                                                f"(tg-add-user {user})")
            db.execute(f"INSERT INTO api_key ({_KEY_COLUMNS}, salt, hash) "
                       f"VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?)",
                       (key_id, user, role, name, created.limits.model_dump_json(), now,
                        expires, salt, key_digest(salt, key)))
        return created, key

    def keys(self, user: str = "") -> list[ApiKey]:
        where, args = ("WHERE user = ?", (user,)) if user else ("", ())
        with self._db.transaction() as db:
            return [_key(row) for row in db.execute(
                f"SELECT {_KEY_COLUMNS} FROM api_key {where} ORDER BY user, created", args)]

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke ``key_id`` (again: it stays revoked as of the first time)."""
        with self._db.transaction(write=True) as db:
            db.execute("UPDATE api_key SET revoked = ? WHERE id = ? AND revoked IS NULL",
                       (time.time(), key_id))
            row = db.execute(f"SELECT {_KEY_COLUMNS} FROM api_key WHERE id = ?",
                             (key_id,)).fetchone()
        if row is None:
            raise HandledError("not-found", f"no key {key_id!r}")
        return _key(row)

    def verifiers(self) -> list[KeyVerifier]:
        """Every key with its salt and hash, and the tokens it used today (UTC)."""
        today = utc_day()
        with self._db.transaction() as db:
            rows = db.execute(
                f"SELECT {', '.join('k.' + c.strip() for c in _KEY_COLUMNS.split(','))}, "
                f"k.salt, k.hash, coalesce(t.tokens, 0) FROM api_key k "
                f"LEFT JOIN api_key_tokens t ON t.id = k.id AND t.day = ?", (today,))
            return [KeyVerifier(**_key(row[:9]).model_dump(), salt=row[9], hash=row[10],
                                day=today, tokens_today=row[11]) for row in rows]

    def record_use(self, uses: list[KeyUse]) -> None:
        """Add gateways' reports: the latest use wins, tokens add up per day; a day
        other than today or yesterday is kept no longer than it is reported."""
        with self._db.transaction(write=True) as db:
            db.executemany("UPDATE api_key SET last_used = max(coalesce(last_used, 0), ?) "
                           "WHERE id = ?", [(use.last_used, use.id) for use in uses])
            db.executemany(
                "INSERT INTO api_key_tokens (id, day, tokens) VALUES (?, ?, ?) "
                "ON CONFLICT (id, day) DO UPDATE SET tokens = tokens + excluded.tokens",
                [(use.id, use.day, use.tokens) for use in uses if use.tokens and use.day])
            db.execute("DELETE FROM api_key_tokens WHERE day < ?", (utc_day(-1),))

    def record_usage(self, rows: list[UsageRow]) -> None:
        """Add gateways' counts of LLM tokens; days past ``USAGE_DAYS`` are dropped."""
        with self._db.transaction(write=True) as db:
            db.executemany(
                "INSERT INTO llm_usage VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (day, user, flow, model, key) DO UPDATE SET "
                "in_tokens = in_tokens + excluded.in_tokens, "
                "out_tokens = out_tokens + excluded.out_tokens, "
                "requests = requests + excluded.requests",
                [(r.day, r.user, r.flow, r.model, r.key, r.in_tokens, r.out_tokens,
                  r.requests) for r in rows])
            db.execute("DELETE FROM llm_usage WHERE day < ?", (utc_day(1 - USAGE_DAYS),))

    def usage(self, days: int, user: str = "") -> list[UsageRow]:
        """The counts of the last ``days`` UTC days (today included), newest first."""
        query = ("SELECT day, user, flow, model, key, in_tokens, out_tokens, requests "
                 "FROM llm_usage WHERE day >= ?" + (" AND user = ?" if user else "") +
                 " ORDER BY day DESC, user, flow, model, key")
        with self._db.transaction() as db:
            rows = db.execute(query, (utc_day(1 - days), *([user] if user else [])))
            return [UsageRow(day=day, user=who, flow=flow, model=model, key=key,
                             in_tokens=tokens_in, out_tokens=tokens_out, requests=requests)
                    for day, who, flow, model, key, tokens_in, tokens_out, requests in rows]


def _key(row: tuple) -> ApiKey:
    key_id, user, role, name, limits, created, expires, revoked, last_used = row
    return ApiKey(id=key_id, user=user, role=role, name=name,
                  limits=KeyLimits(**json.loads(limits)), created=created, expires=expires,
                  revoked=revoked, last_used=last_used)
