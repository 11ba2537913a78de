"""Users and API keys in the config store: keys kept only as salted hashes, shown
once, revocable, expiring; use reported in batches; none of it readable as config."""
import sqlite3
import time

import pytest

from trustgraph.base import BadRequest, HandledError
from trustgraph.config.keys import KeyStore
from trustgraph.config.store import ConfigStore
from trustgraph.schema.keys import (
    KeyLimits,
    KeyUse,
    key_id_of,
    key_matches,
    new_key,
    utc_day,
)


@pytest.fixture
def store(tmp_path):
    keys = KeyStore(tmp_path / "config.db")
    keys.add_user("alice")
    return keys


def test_the_key_is_returned_once_and_stored_only_as_a_salted_hash(store, tmp_path):
    key, secret = store.create_key("alice", "user", name="laptop")
    assert key_id_of(secret) == key.id and key.user == "alice" and key.role == "user"
    with sqlite3.connect(tmp_path / "config.db") as db:
        stored = [str(value) for row in db.execute("SELECT * FROM api_key") for value in row]
    assert not any(secret in value or secret[len("tg_") + 17:] in value for value in stored)
    verifier, = store.verifiers()
    assert key_matches(secret, verifier.salt, verifier.hash)
    assert not key_matches(new_key()[1], verifier.salt, verifier.hash)
    # the same key under another salt hashes otherwise: no table of hashes to look up
    other, other_secret = store.create_key("alice", "user")
    assert {v.hash for v in store.verifiers()} != {verifier.hash}
    assert "secret" not in store.keys()[0].model_dump() and len(store.keys("alice")) == 2
    assert other.id != key.id and other_secret != secret


def test_keys_belong_to_existing_users(store):
    with pytest.raises(HandledError) as failure:
        store.create_key("bob", "reader")
    assert failure.value.type == "not-found" and "tg-add-user bob" in failure.value.message
    with pytest.raises(HandledError) as failure:
        store.add_user("alice")
    assert failure.value.type == "conflict"
    with pytest.raises(BadRequest):
        store.add_user("has space")
    store.add_user("bob@example.org")
    assert [u.user for u in store.users()] == ["alice", "bob@example.org"]


def test_revoked_and_expiring_keys(store):
    key, _ = store.create_key("alice", "admin", expires=time.time() + 60)
    revoked = store.revoke(key.id)
    assert revoked.revoked is not None and store.revoke(key.id).revoked == revoked.revoked
    assert store.verifiers()[0].revoked == revoked.revoked
    with pytest.raises(HandledError):
        store.revoke("0123456789abcdef")
    with pytest.raises(BadRequest):
        store.create_key("alice", "user", expires=time.time() - 1)


def test_use_is_recorded_in_batches_and_tokens_add_up_per_day(store):
    key, _ = store.create_key("alice", "user", limits=KeyLimits(tokens_per_day=1000))
    today = utc_day()
    store.record_use([KeyUse(id=key.id, last_used=100.0, day=today, tokens=30)])
    store.record_use([KeyUse(id=key.id, last_used=50.0, day=today, tokens=12),
                      KeyUse(id=key.id, last_used=60.0, day="2000-01-01", tokens=5)])
    verifier, = store.verifiers()
    assert verifier.last_used == 100.0 and verifier.tokens_today == 42
    assert verifier.day == today and verifier.limits.tokens_per_day == 1000


def test_config_reads_never_see_users_or_keys(store, tmp_path):
    store.create_key("alice", "admin")
    config = ConfigStore(tmp_path / "config.db")
    assert config.everything() == ({}, 0) and config.types() == []
