"""Gateway metrics: counted per request and per socket, never per chunk. An API
module may add its own (and watch a service's answers: ``Dispatcher.observe``)."""
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, generate_latest

from .auth import Caller

REQUESTS = Counter("tg_gateway_requests_total", "Requests accepted by the gateway",
                   ["service", "transport"])
ERRORS = Counter("tg_gateway_errors_total", "Gateway-level errors answered", ["type"])
SOCKETS = Gauge("tg_gateway_open_sockets", "Open websocket connections")


async def scrape(request: web.Request, caller: Caller) -> web.Response:
    """``GET /metrics``: every metric of this process, in Prometheus' text format."""
    return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})
