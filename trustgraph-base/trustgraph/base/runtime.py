"""What a processor's services may touch: the one object its ``ProcessorSpec``
factory is given.

The runtime owns the connection (as FastStream's brokers do: a handler returns or
emits, it never opens a producer). Through ``Runtime`` a factory reaches the clients
of the services it calls, sends durable records to pipeline stages and broadcasts on
a topic, and keeps config types current; it never sees the bus itself, so a processor
cannot open a second connection or outlive its own.
"""
import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..pubsub import Bus
from ..schema import Record, encode
from .clients import Clients
from .config_client import CONFIG_WAIT, ConfigClient, ConfigWatcher, OnChange
from .flows import Flow
from .local import LocalServices
from .rpc import Timing
from .stage import Emitters
from .state import StatePublisher, StoreProbe

# Told the flows a processor serves, after each change to them.
FlowsChanged = Callable[[Mapping[str, Flow]], Awaitable[None]]


class Runtime:
    """One processor's view of the platform: its settings, the clients of each flow,
    stage emitters, broadcasts and watched config, all on the processor's own bus
    (closed when the processor stops)."""

    def __init__(self, name: str, instance: str, settings: Any, bus: Bus,
                 local: LocalServices | None, timing: Timing,
                 state: StatePublisher | None = None) -> None:
        self.name = name
        self.instance = instance  # unique per process: names its own subscriptions
        self.settings = settings
        self._bus = bus
        self._local = local
        self.timing = timing  # the request/response protocol's (``rpc.Timing``)
        self._clients: dict[str, Clients] = {}
        self._emitters: dict[str, Emitters] = {}
        self._producers: dict[str, asyncio.Future] = {}
        self._config: asyncio.Future | None = None
        self._watchers = 0
        self._flow_listeners: list[FlowsChanged] = []
        self._state = state

    def check_store(self, store: str, probe: StoreProbe) -> None:
        """Have ``probe`` (a read, then a write taken back) check ``store`` for the
        processor's state record (``tg-verify-system-status``)."""
        if self._state is not None:
            self._state.check_store(store, probe)

    def clients(self, flow: str) -> Clients:
        if flow not in self._clients:
            self._clients[flow] = Clients(self._bus, flow, self.instance, self.timing,
                                          self._local)
        return self._clients[flow]

    async def emit(self, flow: str, stage: str, record: Record) -> None:
        """Durably send ``record`` to pipeline stage ``stage`` of ``flow``."""
        if flow not in self._emitters:
            self._emitters[flow] = Emitters(self._bus, flow)
        await self._emitters[flow].emit(stage, record)

    async def publish(self, topic: str, record: Record) -> None:
        """Send ``record`` on a broadcast topic (e.g. config change notices)."""
        if topic not in self._producers:
            self._producers[topic] = asyncio.ensure_future(self._bus.producer(topic))
        producer = await asyncio.shield(self._producers[topic])
        await producer.send(encode(record))

    async def config(self) -> ConfigClient:
        """The config service's client (one per processor)."""
        if self._config is None:
            self._config = asyncio.ensure_future(ConfigClient.connect(self._bus, self.instance))
        return await asyncio.shield(self._config)

    async def watch_config(self, types: list[str], on_change: OnChange,
                           wait: float = CONFIG_WAIT) -> bool:
        """Keep ``types`` current: ``on_change(snapshot, version)`` is awaited now
        and after each change. False when config did not answer within ``wait``
        seconds (the snapshot comes when it announces itself)."""
        # A subscription of its own: watchers sharing one would split the notices.
        self._watchers += 1
        subscription = self.instance if self._watchers == 1 else \
            f"{self.instance}-{self._watchers}"
        watcher = ConfigWatcher(self._bus, await self.config(), types, on_change,
                                subscription=subscription)
        return await watcher.start(wait)

    def on_flows(self, listener: FlowsChanged) -> None:
        """Have ``listener(flows)`` awaited after each change to the flows this
        processor serves (what a service holds per flow can be let go of)."""
        self._flow_listeners.append(listener)

    async def flows_changed(self, flows: Mapping[str, Flow]) -> None:
        for listener in self._flow_listeners:
            await listener(flows)
