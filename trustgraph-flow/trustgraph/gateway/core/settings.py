"""The gateway core's settings: where it listens, who may use it (the token, API keys,
JWTs, per-key limits), the flows it routes and its limits. The gateway's settings
(``app.GatewaySettings``) add the APIs' own."""
from pydantic import Field

from trustgraph.base import Settings
from trustgraph.base.settings import CommaList
from trustgraph.pubsub import DEFAULT_PULSAR_URL
from trustgraph.pubsub.pulsar_shim import MAX_RECORD_BYTES


class CoreSettings(Settings):
    pulsar_url: str = DEFAULT_PULSAR_URL
    tg_gateway_host: str = "127.0.0.1"
    tg_gateway_port: int = 8888
    tg_gateway_token: str = ""  # the admin key of a single-user installation
    # API keys, read from the config service (false: only the token, or open)
    tg_gateway_keys: bool = True
    tg_config_wait: float = 10.0  # seconds to wait at start for the config service
    # Each key's limits unless it sets its own; unset: no limit.
    tg_key_concurrent: int | None = Field(None, ge=1)
    tg_key_per_minute: int | None = Field(None, ge=1)
    tg_key_tokens_per_day: int | None = Field(None, ge=1)
    # Optional JWTs: a verification key file (PEM, JWKS, or an HS256 secret)
    tg_jwt_key_file: str = ""
    tg_jwt_algorithms: CommaList = ["RS256", "ES256"]
    tg_jwt_issuer: str = ""
    tg_jwt_audience: str = ""
    tg_jwt_user_claim: str = "sub"
    tg_jwt_role_claim: str = "role"
    tg_flows: CommaList = ["default"]
    tg_request_timeout: float = 120.0  # seconds of silence between response records
    tg_gateway_max_inflight: int = 256  # concurrent requests per websocket
    # bytes per client frame or body: by default what one broker message carries,
    # so the limit a client is told is the one that holds
    tg_gateway_max_frame: int = MAX_RECORD_BYTES
    tg_metrics_open: bool = False  # /metrics without the token even when one is set
