"""A processor: a name, a typed settings model, and the services it serves.

A processor is written as a ``ProcessorSpec`` and nothing else: ``tg-run <name>``
(``trustgraph.run``) loads its settings, builds a ``Processor`` and serves it until
SIGINT/SIGTERM, on every configured flow, answering cancels. The spec's factory is
given the processor's ``Runtime`` (``base/runtime.py``): what its services may touch.

Several processors can share one process and event loop (``serve_together``, a
process group): they then call each other's services directly (``base/local.py``)
instead of over the bus.
"""
import asyncio
import inspect
import logging
import os
import signal
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from ..pubsub import Bus, Message
from ..schema import CANCEL_TOPIC, Cancel, decode
from . import rpc
from .heap import freeze_startup_heap
from .lanes import Slots
from .local import LocalServices
from .rpc import ReplyProducers
from .runtime import Runtime
from .service import Service, ServiceRunner
from .settings import ProcessorSettings
from .stage import Stage, StageContext, StageRunner

log = logging.getLogger(__name__)

Part = Service | Stage
ServicesFactory = Callable[[Runtime], Sequence[Part] | Awaitable[Sequence[Part]]]


@dataclass(frozen=True)
class ProcessorSpec:
    name: str
    settings: type[ProcessorSettings]
    services: ServicesFactory  # builds its request/response services and pipeline stages
    uses: tuple[str, ...] = field(default=())  # services it calls, started up front


class Processor:
    def __init__(self, spec: ProcessorSpec, settings: ProcessorSettings,
                 local: LocalServices | None = None, timing: rpc.Timing = rpc.TIMING) -> None:
        self.spec = spec
        self.settings = settings
        self.instance = f"{spec.name}-{uuid.uuid4().hex[:8]}"
        # The request/response protocol's times, with this processor's request timeout.
        self.timing = replace(timing, timeout=settings.tg_request_timeout)
        self.bus = Bus(settings.pulsar_url, consumer_id_offset=settings.tg_replica)
        # Shared by the processors of one process group (set before start()): where
        # this one registers its services and looks up the ones it calls.
        self.local = local
        self.runtime: Runtime | None = None
        self._inflight: dict[str, asyncio.Task] = {}
        self._services: Sequence[Part] = []
        self._stages: list[StageRunner] = []
        self._runners: list[ServiceRunner] = []
        self._keeping_alive: asyncio.Task | None = None

    async def start(self) -> None:
        runtime = self.runtime = Runtime(self.spec.name, self.instance, self.settings,
                                         self.bus, self.local, self.timing)
        made = self.spec.services(runtime)
        services = await made if inspect.isawaitable(made) else made
        self._services = services
        limit = Slots(self.settings.tg_concurrency, self.settings.tg_interactive_slots)
        replies = ReplyProducers(self.bus)
        await self.bus.consume(CANCEL_TOPIC, self.instance, self._on_cancel,
                               name="cancels")
        for flow in self.settings.tg_flows:
            clients = runtime.clients(flow)
            for service in self.spec.uses:
                await clients.get(service)
            for part in services:
                if isinstance(part, Stage):
                    context = StageContext(flow, clients, partial(runtime.emit, flow))
                    stage = StageRunner(self.bus, part, context, limit,
                                        self.settings.tg_max_deliveries,
                                        self.settings.tg_stage_in_flight)
                    self._stages.append(stage)
                    await stage.start()
                    continue
                runner = ServiceRunner(self.bus, part, flow, runtime, self._inflight,
                                       limit, self.settings.tg_backlog, replies, self.timing)
                self._runners.append(runner)
                await runner.start()
                if self.local is not None:
                    self.local.add(runner)
        self._keeping_alive = asyncio.create_task(self._keep_alive(), name="keep-alive")
        names = ", ".join(s.name for s in services)
        log.info("%s serving [%s] on flows %s via %s", self.spec.name, names,
                 ",".join(self.settings.tg_flows), self.settings.pulsar_url)

    async def _keep_alive(self) -> None:
        while True:
            await asyncio.sleep(self.timing.keep_alive)
            for runner in self._runners:
                await runner.keep_alive()

    async def _on_cancel(self, message: Message) -> None:
        task = self._inflight.get(decode(Cancel, message.data()).id)
        if task is not None:
            task.cancel()

    async def stop(self) -> None:
        if self.local is not None:
            for runner in self._runners:  # callers in the group use the bus from now on
                self.local.remove(runner)
        tasks = list(self._inflight.values())
        if self._keeping_alive is not None:
            tasks.append(self._keeping_alive)
        for stage in self._stages:
            tasks += stage.tasks  # unacknowledged work is redelivered after a restart
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.bus.close()
        for part in self._services:
            if isinstance(part, Service) and part.close is not None:
                await part.close()


async def start_together(processors: list[Processor]) -> None:
    """Start ``processors`` at once, sharing one ``LocalServices`` when there are
    several; if one fails, the others are stopped and its error raised."""
    if len(processors) > 1:
        local = LocalServices()
        for processor in processors:
            processor.local = local
    results = await asyncio.gather(*(p.start() for p in processors), return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    if failures:
        await stop_together(processors)
        raise failures[0]
    if len(processors) > 1:
        log.info("%s share one process; in-process services: %s",
                 " + ".join(p.spec.name for p in processors), ", ".join(local.names()))


async def stop_together(processors: list[Processor]) -> None:
    for processor in processors:
        log.info("%s stopping", processor.spec.name)
    await asyncio.gather(*(p.stop() for p in processors))


async def serve_together(processors: list[Processor]) -> None:
    """Serve until SIGINT/SIGTERM; ready (``TG_READY_FILE``) once every one serves."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await start_together(processors)
    freeze_startup_heap()
    announce_ready()
    try:
        await stop.wait()
    finally:
        await stop_together(processors)


def announce_ready() -> None:
    """Touch ``TG_READY_FILE`` when set: tg-start's "ready" must mean requests are
    answered, and a request sent on a non-persistent topic before its service has
    subscribed would be lost."""
    if ready_file := os.environ.get("TG_READY_FILE"):
        Path(ready_file).touch()
