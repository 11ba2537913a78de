"""A processor: a name, a typed settings model, and the services it serves.

``processor_main(spec)`` is the console entry point of every bus processor: it
parses settings, connects to Pulsar, serves every service on every configured flow,
answers cancels, and shuts down cleanly on SIGINT/SIGTERM.
"""
import asyncio
import inspect
import logging
import os
import signal
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..pubsub import Bus, Message
from ..schema import CANCEL_TOPIC, Cancel, decode
from .requester import Requester
from .service import ReplyProducers, Service, ServiceRunner
from .stage import Stage, StageRunner
from .settings import ProcessorSettings, load_settings

log = logging.getLogger(__name__)

Part = Service | Stage
ServicesFactory = Callable[[ProcessorSettings], list[Part] | Awaitable[list[Part]]]


@dataclass(frozen=True)
class ProcessorSpec:
    name: str
    settings: type[ProcessorSettings]
    services: ServicesFactory  # builds the request/response services and pipeline stages
    uses: tuple[str, ...] = field(default=())  # services it calls, started up front


class Clients:
    """The requesters one processor uses on one flow, created on first use."""

    def __init__(self, bus: Bus, flow: str, owner: str, timeout: float) -> None:
        self._bus = bus
        self._flow = flow
        self._owner = owner
        self._timeout = timeout
        self._requesters: dict[str, asyncio.Future] = {}

    async def get(self, service: str) -> Requester:
        if service not in self._requesters:
            requester = Requester(self._bus, service, self._flow, self._owner, self._timeout)
            self._requesters[service] = asyncio.ensure_future(_started(requester))
        return await asyncio.shield(self._requesters[service])


async def _started(requester: Requester) -> Requester:
    await requester.start()
    return requester


class Processor:
    def __init__(self, spec: ProcessorSpec, settings: ProcessorSettings) -> None:
        self.spec = spec
        self.settings = settings
        self.instance = f"{spec.name}-{uuid.uuid4().hex[:8]}"
        self.bus = Bus(settings.pulsar_url, consumer_id_offset=settings.tg_replica)
        self._inflight: dict[str, asyncio.Task] = {}
        self._services: list[Part] = []
        self._stages: list[StageRunner] = []

    async def start(self) -> None:
        services = self.spec.services(self.settings)
        if inspect.isawaitable(services):
            services = await services
        self._services = services
        limit = asyncio.Semaphore(self.settings.tg_concurrency)
        replies = ReplyProducers(self.bus)
        await self.bus.consume(CANCEL_TOPIC, self.instance, self._on_cancel,
                               name="cancels")
        for flow in self.settings.tg_flows:
            clients = Clients(self.bus, flow, self.instance, self.settings.tg_request_timeout)
            for service in self.spec.uses:
                await clients.get(service)
            for part in services:
                if isinstance(part, Stage):
                    runner = StageRunner(self.bus, part, flow, clients, limit)
                    self._stages.append(runner)
                else:
                    runner = ServiceRunner(self.bus, part, flow, clients, self._inflight,
                                           limit, self.settings.tg_backlog, replies)
                await runner.start()
        names = ", ".join(s.name for s in services)
        log.info("%s serving [%s] on flows %s via %s", self.spec.name, names,
                 ",".join(self.settings.tg_flows), self.settings.pulsar_url)

    async def _on_cancel(self, message: Message) -> None:
        task = self._inflight.get(decode(Cancel, message.data()).id)
        if task is not None:
            task.cancel()

    async def stop(self) -> None:
        tasks = list(self._inflight.values())
        for runner in self._stages:
            tasks += runner.tasks  # unacknowledged work is redelivered after a restart
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.bus.close()
        for part in self._services:
            if isinstance(part, Service) and part.close is not None:
                await part.close()


async def serve_until_stopped(processor: Processor) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await processor.start()
    announce_ready()
    try:
        await stop.wait()
    finally:
        log.info("%s stopping", processor.spec.name)
        await processor.stop()


def announce_ready() -> None:
    """Touch ``TG_READY_FILE`` when set: tg-start's "ready" must mean requests are
    answered, and a request sent on a non-persistent topic before its service has
    subscribed would be lost."""
    if ready_file := os.environ.get("TG_READY_FILE"):
        Path(ready_file).touch()


def processor_main(spec: ProcessorSpec) -> Callable[[list[str] | None], None]:
    def main(argv: list[str] | None = None) -> None:
        settings = load_settings(spec.settings, sys.argv[1:] if argv is None else argv,
                                 spec.name)
        asyncio.run(serve_until_stopped(Processor(spec, settings)))
    return main
