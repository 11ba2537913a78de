"""Gateway metrics: counted per request and per socket, never per chunk."""
from prometheus_client import Counter, Gauge

REQUESTS = Counter("tg_gateway_requests_total", "Requests accepted by the gateway",
                   ["service", "transport"])
ERRORS = Counter("tg_gateway_errors_total", "Gateway-level errors answered", ["type"])
SOCKETS = Gauge("tg_gateway_open_sockets", "Open websocket connections")
