"""Users and API keys made on the bus (the config processor's ``keys`` service), as
``tg-add-user`` and ``tg-create-key`` make them, for tests of a gateway that checks
keys: two users' keys, an admin's, a reader's, a revoked and an expiring one."""
import time
from dataclasses import dataclass

from trustgraph.base import Requester, Timing
from trustgraph.pubsub import Bus
from trustgraph.schema import KEYS_FLOW, KeyLimits, KeysRequest, KeysResponse

EXPIRES_IN = 1.0  # seconds the expiring key lives: it has expired by the time it is used


@dataclass(frozen=True)
class Keys:
    alice: str  # user alice, role user
    bob: str  # user bob, role user
    admin: str  # user root, role admin
    reader: str  # user alice, role reader: alice's data, read only
    revoked: str  # alice's, revoked
    expired: str  # alice's, expiring EXPIRES_IN seconds after it was made
    expires_at: float

    def by_name(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in (
            "alice", "bob", "admin", "reader", "revoked", "expired")}


async def make_keys(broker_url: str, limits: KeyLimits | None = None) -> Keys:
    bus = Bus(broker_url)
    try:
        keys = Requester(bus, "keys", KEYS_FLOW, "test-keys", Timing(timeout=10))
        await keys.start()

        async def ask(**request) -> KeysResponse:
            response = await keys.call(KeysRequest(**request), KeysResponse)
            assert isinstance(response, KeysResponse) and response.error is None, response
            return response

        async def key(user: str, role: str, **fields) -> str:
            secret = (await ask(operation="create-key", owner=user, role=role,
                                limits=limits or KeyLimits(), **fields)).secret
            assert secret is not None
            return secret

        for user in ("alice", "bob", "root"):
            await ask(operation="add-user", owner=user)
        revoked = await key("alice", "user")
        listed = await ask(operation="list-keys", owner="alice")
        await ask(operation="revoke-key", key_id=listed.keys[0].id)
        expires_at = time.time() + EXPIRES_IN
        return Keys(alice=await key("alice", "user"), bob=await key("bob", "user"),
                    admin=await key("root", "admin"), reader=await key("alice", "reader"),
                    revoked=revoked, expired=await key("alice", "user", expires=expires_at),
                    expires_at=expires_at)
    finally:
        await bus.close()
