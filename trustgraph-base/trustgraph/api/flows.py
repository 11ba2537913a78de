"""What a client asks of the ``flow`` service (docs/flows.md): blueprints, and the
flows started from them, by their TrustGraph operations. Listing is for every key;
putting, deleting, starting and stopping for an admin's. ``AsyncTrustGraph`` has
these methods; its websocket carries them (``request``)."""
import json
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from .wire import final_response

PARAMETER_TYPE = "parameter-type"  # the config type parameter types are kept as


class FlowCalls:
    def request(self, service: str, request: dict[str, Any], flow: str | None = "default"
                ) -> AsyncGenerator[dict[str, Any], None]:
        raise NotImplementedError  # AsyncTrustGraph's: over its websocket

    async def config_values(self, type: str) -> dict[str, Any]:
        raise NotImplementedError  # AsyncTrustGraph's

    async def list_blueprints(self) -> list[str]:
        return (await self._flow("list-blueprints")).get("blueprint-names") or []

    async def get_blueprint(self, name: str) -> dict[str, Any]:
        answer = await self._flow("get-blueprint", **{"blueprint-name": name})
        return json.loads(answer["blueprint-definition"])

    async def put_blueprint(self, name: str, definition: Mapping[str, Any]) -> None:
        """Create or replace blueprint ``name`` (flows already started from it keep
        running as they were started)."""
        await self._flow("put-blueprint", **{"blueprint-name": name,
                                             "blueprint-definition": json.dumps(definition)})

    async def delete_blueprint(self, name: str) -> None:
        await self._flow("delete-blueprint", **{"blueprint-name": name})

    async def list_flows(self) -> list[str]:
        return (await self._flow("list-flows")).get("flow-ids") or []

    async def get_flow(self, flow: str) -> dict[str, Any]:
        """A running flow: ``blueprint-name``, ``description``, ``parameters`` (as
        started, typed), ``processors``, ``interfaces``."""
        return json.loads((await self._flow("get-flow", **{"flow-id": flow}))["flow"])

    async def start_flow(self, flow: str, blueprint: str, description: str = "",
                         parameters: Mapping[str, Any] | None = None) -> None:
        """Start ``flow`` from ``blueprint``; each parameter is checked against the
        type the blueprint declares (and converted to it) before anything starts."""
        await self._flow("start-flow", **{"flow-id": flow, "blueprint-name": blueprint,
                                          "description": description,
                                          "parameters": dict(parameters or {})})

    async def stop_flow(self, flow: str) -> None:
        """Stop ``flow``: new requests are refused, answers in flight finish, and
        records waiting on its pipeline stay there for when it starts again."""
        await self._flow("stop-flow", **{"flow-id": flow})

    async def parameter_types(self) -> dict[str, dict[str, Any]]:
        """Every parameter type a blueprint may declare a parameter of, by name."""
        return await self.config_values(PARAMETER_TYPE)

    async def _flow(self, operation: str, **fields: Any) -> dict[str, Any]:
        return await final_response(self.request("flow", {"operation": operation, **fields},
                                                 flow=None))
