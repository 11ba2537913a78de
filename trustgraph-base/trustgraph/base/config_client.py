"""Reading configuration, and being told when it changes.

``ConfigClient`` calls the config service (get / list / values / put / delete /
everything). ``ConfigWatcher`` is what a processor uses to keep some config types
current: it subscribes to the change notifications first, then reads the types, and
reads them again after every notification that touches them, handing each new
snapshot to an async callback. Subscribing before reading means no change can fall
between the two.

The config service may start after the processor: the watcher then keeps its
subscription, and the service's start-up notification makes it read.
"""
import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Any, TypeVar

from ..pubsub import Bus, Message
from ..schema import (
    CONFIG_FLOW,
    CONFIG_NOTIFY_TOPIC,
    ConfigKey,
    ConfigNotify,
    ConfigRequest,
    ConfigResponse,
    ConfigValue,
    Error,
    decode,
)
from .requester import Requester
from .rpc import TIMING, RequestTimeout, ServiceError

log = logging.getLogger(__name__)

# Seconds a watcher retries reading config (at start, and after a change notice)
# before it goes on without: the default of TG_CONFIG_WAIT.
CONFIG_WAIT = 10.0

Snapshot = dict[str, dict[str, Any]]  # {type: {key: value}}
OnChange = Callable[[Snapshot, int], Awaitable[None]]

# Requests sent before the config service has subscribed are lost (non-persistent
# topics), so reads that may race its start are retried, in attempts that start
# short (it subscribes within milliseconds of announcing itself) and grow to this.
MAX_ATTEMPT_SECONDS = 2.0

T = TypeVar("T")


def answered(value: T | None, operation: str) -> T:
    """A field that ``operation`` always answers with; missing, the answer is broken."""
    if value is None:
        raise ServiceError(Error(type="config-error",
                                 message=f"the config service's {operation} answer is "
                                         f"incomplete"))
    return value


class ConfigClient:
    def __init__(self, requester: Requester) -> None:
        self.requester = requester

    @classmethod
    async def connect(cls, bus: Bus, owner: str, timeout: float = 10.0) -> "ConfigClient":
        """A client on ``bus``; ``owner`` names this process's response subscription."""
        requester = Requester(bus, "config", CONFIG_FLOW, owner, replace(TIMING, timeout=timeout))
        await requester.start()
        return cls(requester)

    async def request(self, request: ConfigRequest) -> ConfigResponse:
        """One operation; an error answer raises ``ServiceError``."""
        return await self.requester.call(request, ConfigResponse)

    async def get(self, type: str, key: str) -> Any:
        response = await self.request(ConfigRequest(
            operation="get", keys=[ConfigKey(type=type, key=key)]))
        return answered(response.values, "get")[0].value

    async def list(self, type: str) -> list[str]:
        response = await self.request(ConfigRequest(operation="list", type=type))
        return answered(response.directory, "list")

    async def values(self, type: str) -> dict[str, Any]:
        response = await self.request(ConfigRequest(operation="getvalues", type=type))
        return {item.key: item.value for item in answered(response.values, "getvalues")}

    async def everything(self) -> tuple[Snapshot, int]:
        response = await self.request(ConfigRequest(operation="config"))
        return answered(response.config, "config"), answered(response.version, "config")

    async def put(self, type: str, key: str, value: Any) -> int:
        """Store one item; returns the new version."""
        return await self.put_many(type, {key: value})

    async def put_many(self, type: str, items: dict[str, Any]) -> int:
        """Store several items of one type in one change; returns the new version."""
        values = [ConfigValue(type=type, key=key, value=value) for key, value in items.items()]
        response = await self.request(ConfigRequest(operation="put", values=values))
        return answered(response.version, "put")

    async def delete(self, type: str, *keys: str) -> int:
        request = ConfigRequest(operation="delete",
                                keys=[ConfigKey(type=type, key=key) for key in keys])
        return answered((await self.request(request)).version, "delete")


class ConfigWatcher:
    """Keeps ``types`` current: ``on_change(snapshot, version)`` is awaited with
    ``{type: {key: value}}`` for those types at start and after each change to them."""

    def __init__(self, bus: Bus, client: ConfigClient, types: Iterable[str],
                 on_change: OnChange, subscription: str) -> None:
        self.types = frozenset(types)
        self.version: int | None = None  # of the snapshot last handed over
        self._bus = bus
        self._client = client
        self._on_change = on_change
        self._subscription = subscription
        self._reading = asyncio.Lock()

    async def start(self, wait: float = CONFIG_WAIT) -> bool:
        """Subscribe, then read, retrying for up to ``wait`` seconds. False when the
        config service did not answer in time (reading resumes when it announces
        itself)."""
        await self._bus.consume(CONFIG_NOTIFY_TOPIC, self._subscription, self._notified,
                                name="config notifications")
        return await self.refresh(wait)

    async def _notified(self, message: Message) -> None:
        notice = decode(ConfigNotify, message.data())
        if notice.version == self.version:
            return
        if self.version is not None and notice.types and self.types.isdisjoint(notice.types):
            return
        await self.refresh(CONFIG_WAIT)

    async def refresh(self, wait: float) -> bool:
        """Read the watched types and hand them over if they changed."""
        async with self._reading:
            everything = await self._read(wait)
            if everything is None:
                return False
            snapshot, version = everything
            if version != self.version:
                self.version = version
                try:
                    await self._on_change({t: snapshot.get(t, {}) for t in self.types},
                                          version)
                except Exception:
                    log.exception("config change handler failed (version %s)", version)
            return True

    async def _read(self, wait: float) -> tuple[Snapshot, int] | None:
        deadline = time.monotonic() + wait
        attempt = 0.1
        while True:
            try:
                async with asyncio.timeout(max(0.05, min(attempt, deadline - time.monotonic()))):
                    return await self._client.everything()
            except (TimeoutError, RequestTimeout):
                if time.monotonic() >= deadline:
                    log.warning("config service did not answer within %.1f s", wait)
                    return None
                log.info("waiting for the config service")
                attempt = min(attempt * 2, MAX_ATTEMPT_SECONDS)
