"""The gateway core's settings: where it listens, the token, the flows it routes and
its limits. The gateway's settings (``app.GatewaySettings``) add the APIs' own."""
from trustgraph.base import Settings
from trustgraph.base.settings import CommaList
from trustgraph.pubsub import DEFAULT_PULSAR_URL

from .dispatch import MAX_RECORD_BYTES


class CoreSettings(Settings):
    pulsar_url: str = DEFAULT_PULSAR_URL
    tg_gateway_host: str = "127.0.0.1"
    tg_gateway_port: int = 8888
    tg_gateway_token: str = ""  # empty: open, no auth
    tg_flows: CommaList = ["default"]
    tg_request_timeout: float = 120.0  # seconds of silence between response records
    tg_gateway_max_inflight: int = 256  # concurrent requests per websocket
    # bytes per client frame or body: by default what one broker message carries,
    # so the limit a client is told is the one that holds
    tg_gateway_max_frame: int = MAX_RECORD_BYTES
    tg_metrics_open: bool = False  # /metrics without the token even when one is set
