"""``GET /api/v1/status`` (admins): each processor and replica as it last said
(``schema/state.py``: up, flows served, in flight, waiting, last error, its stores'
checks), each running flow with the processors its blueprint names and which of
them serve it, and the broker (the gateway's own record heard back). What
``tg-show-processor-state``, ``tg-show-flow-state`` and ``tg-verify-system-status``
read (docs/observability.md).
"""
import time
from typing import Any

from aiohttp import web

from trustgraph.base.flows import names
from trustgraph.schema.state import ProcessorState

from .caller import Caller
from .flows import RunningFlows
from .states import ProcessorStates

STATUS = "/api/v1/status"

Heard = list[tuple[ProcessorState, bool, float]]


def processor_row(state: ProcessorState, up: bool, age: float) -> dict[str, Any]:
    row = state.model_dump(exclude={"up"}, exclude_none=True)
    return {**row, "up": up, "age": age}


def flow_row(flow_id: str, blueprint: str, listed: list[str] | None,
             heard: Heard) -> dict[str, Any]:
    """A flow and, for each processor it names (``listed``; None: a pinned flow,
    named by no blueprint), the instances serving it now."""
    serving = [(state, up) for state, up, _ in heard
               if flow_id in state.flows and state.processor != "gateway"]
    if listed is None:
        listed = sorted({state.processor for state, _ in serving})
    processors = []
    for name in listed:
        instances = [state.instance for state, up in serving
                     if up and names(name, state.processor)]
        down = [state.instance for state, up in serving
                if not up and names(name, state.processor)]
        processors.append({"name": name, "serving": instances, "down": down,
                           "ok": bool(instances)})
    return {"id": flow_id, "blueprint": blueprint, "processors": processors,
            "ok": all(p["ok"] for p in processors)}


class StatusRoute:
    def __init__(self, flows: RunningFlows, states: ProcessorStates) -> None:
        self.flows = flows
        self.states = states

    async def __call__(self, request: web.Request, caller: Caller) -> web.Response:
        heard = self.states.heard()
        rows = []
        for flow_id in self.flows:
            definition = self.flows.definition(flow_id)
            rows.append(flow_row(
                flow_id, definition.blueprint_name if definition else "",
                definition.processors if definition else None, heard))
        broker = self.states.broker_up()
        return web.json_response({
            "time": time.time(),
            "broker": {"up": broker},
            "processors": [processor_row(*each) for each in heard],
            "flows": rows,
            "ok": broker and all(row["ok"] for row in rows),
        })
