"""The gateway core's settings: who may use it (API keys, JWTs, per-key limits) and its
limits, beside where it listens and the settings every process has
(``GatewayEndpoint``, shared with tg-start). The gateway's settings
(``app.GatewaySettings``) add the APIs' own."""
from pydantic import Field

from trustgraph.base.settings import CommaList, GatewayEndpoint
from trustgraph.pubsub.pulsar_shim import MAX_RECORD_BYTES


class CoreSettings(GatewayEndpoint):
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
    tg_gateway_max_inflight: int = 256  # concurrent requests per websocket
    # bytes per client frame or body: by default what one broker message carries,
    # so the limit a client is told is the one that holds
    tg_gateway_max_frame: int = MAX_RECORD_BYTES
    tg_metrics_open: bool = False  # /metrics without the token even when one is set
    # Label sets of tg_llm_tokens_total (flow, user, key, model) before new ones are
    # counted as user and key "other": bounds what a scraper stores.
    tg_metrics_max_series: int = Field(1000, ge=1)
    # Seconds between reports of the keys' use and the LLM tokens counted to the keys
    # service (kept there per day: GET /api/v1/usage).
    tg_usage_report: float = Field(30.0, gt=0)
