"""A processor: a name, a typed settings model, and the services it serves.

A processor is written as a ``ProcessorSpec`` and nothing else: ``tg-run <name>``
(``trustgraph.run``) loads its settings, builds a ``Processor`` and serves it until
SIGINT/SIGTERM, answering cancels. The spec's factory is given the processor's
``Runtime`` (``base/runtime.py``): what its services may touch.

Its services and stages are served on every running flow whose processors name it
(config type ``flow``), followed while it runs (``serving.FlowServing``); a service
outside flows (``Service.global_flow``) on its own flow only. ``TG_FLOWS`` set pins
the flows instead (``base/flows.py``).

Several processors can share one process and event loop (``serve_together``, a
process group): they then call each other's services directly (``base/local.py``)
instead of over the bus.
"""
import asyncio
import inspect
import logging
import os
import signal
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from ..pubsub import Bus, Message
from ..schema import CANCEL_TOPIC, Cancel, decode
from ..schema.flows import DEFAULT_FLOW, FLOW_CONFIG_TYPE
from ..schema.state import ProcessorState
from . import rpc
from .flows import Flow, flows_of, pinned
from .heap import freeze_startup_heap
from .lanes import Slots
from .local import LocalServices
from .reply import ReplyProducers
from .runtime import Runtime
from .service import Service, ServiceRunner
from .serving import FlowServing, Served
from .settings import ProcessorSettings
from .stage import Stage, StageContext, StageRunner
from .state import StatePublisher

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
                 local: LocalServices | None = None, timing: rpc.Timing = rpc.TIMING,
                 process: str = "") -> None:
        self.spec = spec
        self.settings = settings
        self.instance = f"{spec.name}-{uuid.uuid4().hex[:8]}"
        self.process = process or spec.name  # tg-start's name for this process
        self.started = time.time()
        # The request/response protocol's times, with this processor's request timeout.
        self.timing = replace(timing, timeout=settings.tg_request_timeout)
        self.bus = Bus(settings.pulsar_url, replica=settings.tg_replica)
        # Shared by the processors of one process group (set before start()): where
        # this one registers its services and looks up the ones it calls.
        self.local = local
        self.runtime: Runtime | None = None
        self._inflight: dict[str, asyncio.Task] = {}
        self._services: Sequence[Part] = []
        self._global: list[ServiceRunner] = []  # services outside flows
        self._serving: FlowServing | None = None
        self._limit = Slots(settings.tg_concurrency, settings.tg_interactive_slots)
        self._replies = ReplyProducers(self.bus)
        self._keeping_alive: asyncio.Task | None = None
        # Its state record, every TG_STATE_PERIOD (GET /api/v1/status).
        self.state = StatePublisher(self.bus, self._state, settings.tg_state_period)
        self._publishing: asyncio.Task | None = None

    @property
    def flows(self) -> Mapping[str, Flow]:
        """The flows this processor serves now, by id (its services outside flows
        aside)."""
        return self._serving.flows if self._serving is not None else {}

    async def start(self) -> None:
        runtime = self.runtime = Runtime(self.spec.name, self.instance, self.settings,
                                         self.bus, self.local, self.timing, self.state)
        made = self.spec.services(runtime)
        services = await made if inspect.isawaitable(made) else made
        self._services = services
        await self.bus.consume(CANCEL_TOPIC, self.instance, self._on_cancel,
                               name="cancels")
        for part in services:
            if isinstance(part, Service) and part.global_flow is not None:
                self._global.append(await self._serve(part, Flow.plain(part.global_flow)))
        self._serving = FlowServing(self.spec.name, self._start_flow, self.local,
                                    runtime.flows_changed)
        if any(self._in_flows(part) for part in services):
            await self._follow_flows()
        self._keeping_alive = asyncio.create_task(self._keep_alive(), name="keep-alive")
        self._publishing = asyncio.create_task(self.state.run(), name="state")
        names = ", ".join(s.name for s in services)
        log.info("%s serving [%s] on flows %s via %s", self.spec.name, names,
                 ",".join(self.flows) or "(none yet)", self.settings.pulsar_url)

    @staticmethod
    def _in_flows(part: Part) -> bool:
        return isinstance(part, Stage) or part.global_flow is None

    def _parts_on(self, flow: str) -> list[Part]:
        """What this processor serves on ``flow``: its parts in flows; on a flow
        ``TG_FLOWS`` pins, its services outside flows too, as processors served
        everything on every flow before flows were config (a test asks the
        librarian on its own flow)."""
        pinned = bool(self.settings.tg_flows)
        return [part for part in self._services if self._in_flows(part) or (
            pinned and isinstance(part, Service) and part.global_flow != flow)]

    async def _follow_flows(self) -> None:
        """Serve the flows ``TG_FLOWS`` pins; else those config runs, waiting up to
        ``TG_CONFIG_WAIT`` for it, serving ``DEFAULT_FLOW`` until it answers."""
        assert self._serving is not None and self.runtime is not None
        if self.settings.tg_flows:
            await self._serving.apply(pinned(self.settings.tg_flows))
            return
        followed = await self.runtime.watch_config([FLOW_CONFIG_TYPE], self._flows_changed,
                                                   self.settings.tg_config_wait)
        if not followed:
            log.warning("%s: no config service answered within %.0f s: serving flow %s "
                        "until one does (TG_FLOWS pins the flows instead)", self.spec.name,
                        self.settings.tg_config_wait, DEFAULT_FLOW)
            await self._serving.apply(pinned([DEFAULT_FLOW]), from_config=False)

    async def _flows_changed(self, config: dict[str, dict[str, object]], version: int) -> None:
        assert self._serving is not None
        before = set(self.flows)
        await self._serving.apply(flows_of(self.spec.name, config.get(FLOW_CONFIG_TYPE, {})))
        if set(self.flows) != before and self._publishing is not None:
            await self.state.send()  # a flow started or stopped shows at once

    def _state(self) -> ProcessorState:
        """This processor's state record, from what it keeps anyway."""
        runners = self._runners()
        stages = list(self._serving.stages()) if self._serving is not None else []
        return ProcessorState(
            processor=self.spec.name, instance=self.instance, process=self.process,
            started=self.started, flows=sorted(self.flows),
            services=sorted({part.name for part in self._services}),
            in_flight=len(self._inflight) + sum(len(stage.tasks) for stage in stages),
            waiting=sum(runner.waiting for runner in runners))

    async def _start_flow(self, flow: Flow) -> Served:
        """The runners of every part of this processor on ``flow``, started; if one
        fails, those started are stopped and its error raised."""
        assert self.runtime is not None
        runtime, served = self.runtime, Served(flow)
        clients = runtime.clients(flow.id)
        try:
            for part in self._parts_on(flow.id):
                if isinstance(part, Stage):
                    context = StageContext(flow.id, clients, partial(runtime.emit, flow.id),
                                           flow.parameters)
                    stage = StageRunner(self.bus, part, context, self._limit,
                                        self.settings.tg_max_deliveries,
                                        self.settings.tg_stage_in_flight, self.spec.name)
                    served.stages.append(stage)
                    await stage.start()
                else:
                    served.services.append(await self._serve(part, flow))
            for service in self.spec.uses:  # after its own: the flow is served sooner
                await clients.get(service)
        except BaseException:
            for runner in served.services:
                if self.local is not None:
                    self.local.remove(runner)
                await runner.stop()
            for stage in served.stages:
                await stage.stop()
            raise
        return served

    async def _serve(self, service: Service, flow: Flow) -> ServiceRunner:
        assert self.runtime is not None
        runner = ServiceRunner(self.bus, service, flow.id, self.runtime, self._inflight,
                               self._limit, self.settings.tg_backlog, self._replies,
                               self.timing, flow.parameters)
        await runner.start()
        if self.local is not None:
            self.local.add(runner)
        return runner

    def _runners(self) -> list[ServiceRunner]:
        serving = list(self._serving.runners()) if self._serving is not None else []
        return [*self._global, *serving]

    async def _keep_alive(self) -> None:
        while True:
            await asyncio.sleep(self.timing.keep_alive)
            for runner in self._runners():
                await runner.keep_alive()

    async def _on_cancel(self, message: Message) -> None:
        task = self._inflight.get(decode(Cancel, message.data()).id)
        if task is not None:
            task.cancel()

    async def stop(self) -> None:
        runners = self._runners()
        if self.local is not None:
            for runner in runners:  # callers in the group use the bus from now on
                self.local.remove(runner)
        tasks = list(self._inflight.values())
        if self._keeping_alive is not None:
            tasks.append(self._keeping_alive)
        if self._publishing is not None:
            self._publishing.cancel()
            await asyncio.gather(self._publishing, return_exceptions=True)
            await self.state.send(up=False)  # known stopped at once, not after 3 periods
        if self._serving is not None:
            tasks += self._serving.shutdown()
            for stage in self._serving.stages():
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
