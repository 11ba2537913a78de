"""``GET /api/v1/usage?days=&user=`` (admins): the LLM tokens each user spent per UTC
day, flow, model and key, as the gateways reported them to the keys service
(``core/usage.py``), each row with its cost at ``token-cost``'s prices now (null for
a model without one). What ``tg-show-usage`` reads."""
from aiohttp import web

from trustgraph.schema.keys import USAGE_DAYS

from ..core import Caller, Core, bad_request

USAGE = "/api/v1/usage"


def install(core: Core) -> None:
    client = core.client

    async def usage(request: web.Request, caller: Caller) -> web.Response:
        days = request.query.get("days", "1")
        if not days.isdigit() or not 1 <= int(days) <= USAGE_DAYS:
            raise bad_request(f"days: a whole number from 1 to {USAGE_DAYS}")
        row = client.resolve("keys", None)
        record = client.prepare(row, {"operation": "usage", "days": int(days),
                                      "owner": request.query.get("user", "")})
        answer = await client.final(row, "", record, caller=caller)
        prices = client.ledger.prices
        rows = []
        for each in answer.get("usage") or []:
            price = prices.get(each.get("model", ""))
            cost = None if price is None else round(
                each.get("in_tokens", 0) * price[0] + each.get("out_tokens", 0) * price[1], 6)
            rows.append({**each, "cost": cost})
        return web.json_response({"days": int(days), "rows": rows})

    core.route("GET", USAGE, usage)  # the keys row's permission: admins
