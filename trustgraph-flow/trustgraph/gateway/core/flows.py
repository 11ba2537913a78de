"""The flows this gateway routes: those running (config type ``flow``, followed while
it serves), or, with ``TG_FLOWS`` set, those it names (pinned, config unread).

A request naming any other flow is refused with a 404 naming those that run
(``Dispatcher.resolve``). Until config has answered (``TG_CONFIG_WAIT``), flow
``default`` is routed, as processors serve it without config (base/flows.py).
"""
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from aiohttp import web
from pydantic import JsonValue, ValidationError

from trustgraph.base import ConfigClient, ConfigWatcher
from trustgraph.base.config_client import CONFIG_WAIT
from trustgraph.pubsub import Bus
from trustgraph.schema.flows import DEFAULT_FLOW, FLOW_CONFIG_TYPE, FlowDefinition

log = logging.getLogger(__name__)

# How a client of an API whose requests have no flow field of their own (MCP; an
# OpenAI client that cannot add one) names the flow: this header, or ``?flow=``.
FLOW_HEADER = "X-TG-Flow"


def named_flow(request: web.Request) -> str | None:
    """The flow ``request`` names by header or query (None: it names none)."""
    return request.headers.get(FLOW_HEADER) or request.query.get("flow") or None


class RunningFlows:
    def __init__(self, pinned: list[str]) -> None:
        self.pinned = bool(pinned)
        self._flows: dict[str, FlowDefinition | None] = {flow: None for flow in pinned}
        self._watcher: ConfigWatcher | None = None
        self._read = False  # config has answered

    @property
    def default(self) -> str:
        """The flow a request naming none is asked on (the first pinned one, else
        ``default``)."""
        return next(iter(self._flows), DEFAULT_FLOW) if self.pinned else DEFAULT_FLOW

    def __contains__(self, flow: object) -> bool:
        return flow in self._flows

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._flows))

    def parameters(self, flow: str) -> Mapping[str, JsonValue]:
        """The flow's parameter values (none for a pinned or unknown flow)."""
        definition = self._flows.get(flow)
        return definition.parameters if definition is not None else {}

    def definition(self, flow: str) -> FlowDefinition | None:
        """The running flow as config holds it (None: pinned, or not running)."""
        return self._flows.get(flow)

    async def start(self, bus: Bus, owner: str, wait: float) -> None:
        """Follow config (not when pinned), waiting ``wait`` seconds for it."""
        if self.pinned:
            return
        client = await ConfigClient.connect(bus, f"{owner}-flows")
        self._watcher = ConfigWatcher(bus, client, [FLOW_CONFIG_TYPE], self._changed,
                                      subscription=f"{owner}-flows")
        if not await self._watcher.start(wait) and not self._read:
            log.warning("no config service answered within %.0f s: routing flow %s until "
                        "one does", wait, DEFAULT_FLOW)
            self._flows = {DEFAULT_FLOW: None}

    def close(self) -> None:
        """Let go of the watcher (it holds this object: a cycle the pulsar client's
        objects must not wait in for the interpreter's exit)."""
        self._watcher = None

    async def refresh(self) -> None:
        """Read the running flows now (after this gateway started or stopped one, so
        the caller's next request finds it as it left it)."""
        if self._watcher is not None:
            await self._watcher.refresh(CONFIG_WAIT)

    async def _changed(self, config: dict[str, dict[str, Any]], version: int) -> None:
        flows: dict[str, FlowDefinition | None] = {}
        for flow_id, item in config.get(FLOW_CONFIG_TYPE, {}).items():
            try:
                flows[flow_id] = FlowDefinition.model_validate(item)
            except ValidationError:
                log.warning("config item flow/%s is not a flow: not routed", flow_id)
        if set(flows) != set(self._flows):
            log.info("flows running: %s", ", ".join(sorted(flows)) or "none")
        self._flows, self._read = flows, True
