"""The ``flow`` service as a bus test asks it: ``FlowService(bus)``, then ``start``,
``stop``, ``put_blueprint``, ... (each one request, an error answer raised as
``ServiceError``)."""
import json
import uuid

from trustgraph.base import Requester, Timing
from trustgraph.schema import FLOW_SERVICE_FLOW, FlowRequest, FlowResponse


class FlowService:
    def __init__(self, bus) -> None:
        self.requester = Requester(bus, "flow", FLOW_SERVICE_FLOW,
                                   f"flows-{uuid.uuid4().hex[:8]}", Timing(timeout=10))

    async def started(self) -> "FlowService":
        await self.requester.start()
        return self

    async def ask(self, operation: str, **fields) -> FlowResponse:
        return await self.requester.call(FlowRequest(operation=operation, **fields),
                                         FlowResponse)

    async def put_blueprint(self, name: str, definition: dict) -> None:
        await self.ask("put-blueprint", blueprint_name=name,
                       blueprint_definition=json.dumps(definition))

    async def start(self, flow: str, blueprint: str, **parameters) -> None:
        await self.ask("start-flow", flow_id=flow, blueprint_name=blueprint,
                       description=f"test flow {flow}", parameters=parameters)

    async def stop(self, flow: str) -> None:
        await self.ask("stop-flow", flow_id=flow)

    async def flow(self, flow: str) -> dict:
        return json.loads((await self.ask("get-flow", flow_id=flow)).flow)

    async def flows(self) -> list[str]:
        return (await self.ask("list-flows")).flow_ids or []
