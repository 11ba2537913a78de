"""Gateway metrics: counted per request and per socket, never per chunk. An API
module may add its own (and watch a service's answers: ``Dispatcher.observe``)."""
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, generate_latest

from .caller import Caller

REQUESTS = Counter("tg_gateway_requests_total", "Requests accepted by the gateway",
                   ["service", "transport"])
ERRORS = Counter("tg_gateway_errors_total", "Gateway-level errors answered", ["type"])
SOCKETS = Gauge("tg_gateway_open_sockets", "Open websocket connections")
# Per user and role (never a key: labels are read by whoever may scrape).
CALLER_REQUESTS = Counter("tg_gateway_caller_requests_total",
                          "Requests to services admitted, by who asked", ["user", "role"])
REFUSED = Counter("tg_gateway_refused_total", "Requests to services refused for who "
                  "asked (forbidden, rate-limited)", ["user", "role", "reason"])
LLM_TOKENS = Counter("tg_gateway_llm_tokens_total", "LLM tokens of the answers, by who "
                     "asked", ["user", "role", "direction"])


async def scrape(request: web.Request, caller: Caller) -> web.Response:
    """``GET /metrics``: every metric of this process, in Prometheus' text format."""
    return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})
