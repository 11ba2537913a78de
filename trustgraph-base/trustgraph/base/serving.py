"""The flows a processor serves, kept equal to the flows it should serve.

``FlowServing.apply(flows)`` is given the flows the processor belongs to now (from
config, ``TG_FLOWS``, or the fallback: ``base/flows.py``) and makes it so: a flow
new to it gets its runners (one ``ServiceRunner`` per service, one ``StageRunner``
per stage), a flow gone has them stopped, a flow whose parameters changed has them
handed the new ones. Stopping a flow refuses its new requests at once; the requests
being answered are answered, and its stages finish the records in hand (in the
background) and leave the rest in their subscriptions for when it starts again.
A flow whose runners could not start (the broker away for a moment) is tried again,
after ``RETRY_FIRST`` seconds, doubling to ``RETRY_MAX``, until it starts or no
longer runs: config says nothing more about a flow that started, so nothing else
would try it again.
"""
import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field

from .flows import Flow
from .local import LocalServices
from .service import ServiceRunner
from .stage import StageRunner

log = logging.getLogger(__name__)

RETRY_FIRST, RETRY_MAX = 1.0, 30.0


@dataclass
class Served:
    """One flow's runners in this processor."""

    flow: Flow
    services: list[ServiceRunner] = field(default_factory=list)
    stages: list[StageRunner] = field(default_factory=list)

    def update(self, flow: Flow) -> None:
        """New parameters: each request and record from now on reads them."""
        self.flow = flow
        for runner in self.services:
            runner.parameters = flow.parameters
        for stage in self.stages:
            stage.context.parameters = flow.parameters


# Starts a flow's runners (registering its services in the process group's
# ``LocalServices``), stopping those it started if one fails.
StartFlow = Callable[[Flow], Awaitable[Served]]


class FlowServing:
    def __init__(self, name: str, start: StartFlow, local: LocalServices | None,
                 changed: Callable[[Mapping[str, Flow]], Awaitable[None]] | None = None
                 ) -> None:
        self._name = name  # the processor's, for the log
        self._start = start
        self._local = local
        self._changed = changed  # told the flows served after each change
        self._served: dict[str, Served] = {}
        self._draining: set[ServiceRunner] = set()  # stopped, still answering
        self._stopping: set[asyncio.Task] = set()  # stages finishing their records
        self._changing = asyncio.Lock()
        self.from_config = False  # set once config has said which flows run
        self._wanted: Mapping[str, Flow] = {}  # what the last ``apply`` was given
        self._retry: asyncio.Task | None = None  # the next try of flows that failed
        self._retry_after = RETRY_FIRST

    @property
    def flows(self) -> Mapping[str, Flow]:
        """The flows served now, by id."""
        return {flow_id: served.flow for flow_id, served in self._served.items()}

    async def apply(self, flows: Mapping[str, Flow], from_config: bool = True) -> None:
        """Serve exactly ``flows``. ``from_config`` false (the fallback when no config
        service answered) changes nothing once config has been applied."""
        async with self._changing:
            if not from_config and self.from_config:
                return
            self.from_config = self.from_config or from_config
            self._wanted = flows
            before = self.flows
            for flow_id in [f for f in self._served if f not in flows]:
                await self._stop(self._served.pop(flow_id))
            for flow_id, flow in flows.items():
                served = self._served.get(flow_id)
                if served is None:
                    await self._begin(flow)
                elif served.flow != flow:
                    served.update(flow)
                    log.info("%s: flow %s has new parameters", self._name, flow_id)
            if self._changed is not None and self.flows != before:
                try:
                    await self._changed(self.flows)
                except Exception:
                    log.exception("%s: a listener to its flows failed", self._name)
            if any(flow_id not in self._served for flow_id in flows):
                self._try_again()
            else:
                self._retry_after = RETRY_FIRST

    async def _begin(self, flow: Flow) -> None:
        try:
            self._served[flow.id] = await self._start(flow)
        except Exception:
            log.exception("%s: could not start serving flow %s; trying again in %g s",
                          self._name, flow.id, self._retry_after)
            return
        log.info("%s: serving flow %s", self._name, flow.id)

    def _try_again(self) -> None:
        """Apply what was wanted again, later (once: a try already due stands)."""
        if self._retry is not None and not self._retry.done():
            return
        delay, self._retry_after = self._retry_after, min(2 * self._retry_after, RETRY_MAX)

        async def retry() -> None:
            await asyncio.sleep(delay)
            self._retry = None  # this try is under way: one it leads to may be due
            await self.apply(self._wanted, self.from_config)
        self._retry = asyncio.create_task(retry(), name=f"{self._name}: starting flows again")

    async def _stop(self, served: Served) -> None:
        for runner in served.services:
            if self._local is not None:
                self._local.remove(runner)  # callers in the group use the bus from now on
            await runner.stop()
            if runner.answering:
                self._draining.add(runner)
        for stage in served.stages:
            task = asyncio.create_task(stage.stop(), name=f"stopping {stage.stage.name}")
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)
        log.info("%s: flow %s stopped", self._name, served.flow.id)

    def runners(self) -> Iterator[ServiceRunner]:
        """Every service runner with requests to keep alive: those serving, and those
        of stopped flows still answering."""
        self._draining = {runner for runner in self._draining if runner.answering}
        yield from self._draining
        for served in self._served.values():
            yield from served.services

    def stages(self) -> Iterator[StageRunner]:
        for served in self._served.values():
            yield from served.stages

    def shutdown(self) -> list[asyncio.Task]:
        """The tasks to cancel when the processor stops: stages still finishing the
        records of a stopped flow (unacknowledged, they are redelivered), and a try
        to start flows again."""
        return [*self._stopping, *([self._retry] if self._retry is not None else [])]
