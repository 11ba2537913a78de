"""``GET /api/v1/llm``: which LLM answers, for the workbench's notice when it is the
bundled demo model (or none at all).

Text-completion records its choice in config when it starts (``llm`` /
``text-completion``); this reads it from there rather than from the gateway's own
environment, because the two may run on different machines.
"""
from aiohttp import web

from trustgraph.base import ServiceError
from trustgraph.schema.config import CONFIG_FLOW, LLM_CONFIG_KEY, LLM_CONFIG_TYPE

from ..core import ITSELF, Caller, Core, Dispatcher

PATH = "/api/v1/llm"
# Before any text-completion has started (or with an older one): nothing to say.
UNKNOWN = {"provider": "", "model": "", "demo": False, "notice": ""}


def install(core: Core) -> None:
    async def llm(request: web.Request, caller: Caller) -> web.Response:
        return web.json_response(await recorded(core.client))

    core.route("GET", PATH, llm)


async def recorded(client: Dispatcher) -> dict:
    row = client.resolve("config", CONFIG_FLOW)
    record = client.prepare(row, {"operation": "get", "keys": [
        {"type": LLM_CONFIG_TYPE, "key": LLM_CONFIG_KEY}]})
    try:
        # Read as the gateway itself: which LLM answers is no secret from any role.
        final = await client.final(row, CONFIG_FLOW, record, caller=ITSELF)
    except ServiceError:  # not recorded yet, or no config service: no notice
        return UNKNOWN
    values = final.get("values") or [{}]
    value = values[0].get("value")
    return {**UNKNOWN, **value} if isinstance(value, dict) else UNKNOWN
