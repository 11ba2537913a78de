"""The API keys as the gateway holds them: every key's verifier (salt and hash, owner,
role, limits, expiry, revocation) in memory, so checking a key is one SHA-256 and a
dictionary look-up, never a bus round trip.

Kept current by the config service's change notices: a notice naming
``KEYS_CHANGED`` (a user or key added, a key revoked), or the notice the service
sends when it starts, and the keys are read again (``verifiers``). Until they have
been read once, a key cannot be checked (503 ``auth-unavailable``), and a gateway
with no other credential configured is not taken to be open.

How keys were used (when last, LLM tokens per day: the ``Limiter``'s counts) is
reported to the keys service every ``report_every`` seconds and at shutdown, off
the requests' path.
"""
import asyncio
import logging
import time
from dataclasses import replace

from trustgraph.base import TIMING, Requester, RequestTimeout, ServiceError
from trustgraph.pubsub import Bus, Message
from trustgraph.schema import (
    CONFIG_NOTIFY_TOPIC,
    KEYS_CHANGED,
    KEYS_FLOW,
    ConfigNotify,
    KeysRequest,
    KeysResponse,
    KeyVerifier,
    decode,
)
from trustgraph.schema.keys import key_id_of, key_matches

from .caller import Caller, auth_failed
from .errors import GatewayError
from .limits import Limiter, Limits
from .usage import UsageLedger

log = logging.getLogger(__name__)

REPORT_EVERY = 30.0  # seconds between reports of the keys' use


class KeyRing:
    def __init__(self, bus: Bus, owner: str, limiter: Limiter, defaults: Limits,
                 report_every: float = REPORT_EVERY,
                 ledger: UsageLedger | None = None) -> None:
        self._bus = bus
        self._ledger = ledger  # LLM tokens per day, user, flow, model: reported too
        self._owner = owner
        self._limiter = limiter
        self._defaults = defaults
        self._report_every = report_every
        # A response topic of its own: the dispatcher's keys requester has ``owner``'s.
        self._requester = Requester(bus, "keys", KEYS_FLOW, f"{owner}-keyring",
                                    replace(TIMING, timeout=10))
        self._keys: dict[str, tuple[KeyVerifier, Caller]] = {}
        self._reading = asyncio.Lock()
        self._reporter: asyncio.Task | None = None
        self.ready = False  # read at least once

    @property
    def empty(self) -> bool:
        """Read, and not one key was ever created (revoked ones count)."""
        return self.ready and not self._keys

    async def start(self, wait: float) -> bool:
        """Subscribe to change notices, then read the keys, trying for ``wait``
        seconds. False when the keys service did not answer (read when it starts)."""
        self._requester.timing = replace(self._requester.timing, accept_timeout=wait)
        await self._requester.start()
        await self._bus.consume(CONFIG_NOTIFY_TOPIC, f"{self._owner}-keys", self._notified,
                                name="key change notices")
        loaded = await self.refresh()
        self._reporter = asyncio.create_task(self._report_periodically())
        return loaded

    async def close(self) -> None:
        if self._reporter is not None:
            self._reporter.cancel()
            await asyncio.gather(self._reporter, return_exceptions=True)
            self._reporter = None
            await self.report()

    async def _notified(self, message: Message) -> None:
        if KEYS_CHANGED in decode(ConfigNotify, message.data()).types:
            await self.refresh()

    async def refresh(self) -> bool:
        async with self._reading:
            try:
                response = await self._requester.call(KeysRequest(operation="verifiers"),
                                                      KeysResponse)
                assert isinstance(response, KeysResponse)
            except (RequestTimeout, ServiceError) as error:
                log.warning("could not read the API keys (the config service answers "
                            "them): %s", error)
                return False
            verifiers = response.verifiers or []
            self._keys = {v.id: (v, self._caller(v)) for v in verifiers}
            for verifier in verifiers:
                self._limiter.reported(verifier.id, verifier.day, verifier.tokens_today)
            if not self.ready:
                log.info("%d API keys read", len(verifiers))
            self.ready = True
            return True

    def _caller(self, verifier: KeyVerifier) -> Caller:
        return Caller(verifier.user, verifier.role, verifier.id, "key",
                      Limits.of(verifier.limits, self._defaults))

    def check_ready(self) -> None:
        if not self.ready:
            raise GatewayError("auth-unavailable", "the gateway has not yet read its API "
                               "keys from the config service (is it running?); retry "
                               "shortly", 503, retry_after=5)

    def identify(self, key: str) -> Caller:
        """The caller holding ``key``, or the 401 saying why not: a revoked or an
        expired key is told so only when its secret is right."""
        self.check_ready()
        held = self._keys.get(key_id_of(key) or "")
        if held is None or not key_matches(key, held[0].salt, held[0].hash):
            raise auth_failed()
        verifier, caller = held
        if verifier.revoked is not None:
            raise auth_failed(f"key {verifier.id} was revoked")
        if verifier.expires is not None and time.time() >= verifier.expires:
            raise auth_failed(f"key {verifier.id} has expired")
        return caller

    async def report(self) -> None:
        """Send what the limiter counted since the last report (its keys only), and
        the LLM tokens counted (kept for the next report if this one fails)."""
        uses = self._limiter.uses(self._keys)
        usage = self._ledger.drain() if self._ledger is not None else []
        if not uses and not usage:
            return
        try:
            await self._requester.call(KeysRequest(operation="record-use", uses=uses,
                                                   usage=usage), KeysResponse)
        except (RequestTimeout, ServiceError) as error:
            if self._ledger is not None:
                self._ledger.give_back(usage)
            log.warning("the use of %d API keys was not recorded: %s", len(uses), error)

    async def _report_periodically(self) -> None:
        while True:
            await asyncio.sleep(self._report_every)
            try:
                await self.report()
            except Exception:
                log.exception("reporting the API keys' use failed")
