"""What an admin reads of the platform's state and usage (docs/observability.md):
``GET /api/v1/status`` (each processor and replica, each running flow and who serves
it, the broker) and ``GET /api/v1/usage`` (LLM tokens per day, user, flow and model,
with their cost). ``AsyncTrustGraph`` has these methods."""
from typing import Any

from .http import GatewayHttp

STATUS_PATH = "/api/v1/status"
USAGE_PATH = "/api/v1/usage"


class StatusCalls:
    _http: GatewayHttp

    async def status(self) -> dict[str, Any]:
        """``{"broker": {"up"}, "processors": [...], "flows": [...], "ok"}``: each
        processor instance as it last said (``processor``, ``instance``, ``process``,
        ``up``, ``age`` in seconds, ``flows``, ``in_flight``, ``waiting``,
        ``last_error``, ``stores``), each flow with ``processors``: each name its
        blueprint lists, the instances ``serving`` it and ``ok``."""
        return await self._http.get(STATUS_PATH)

    async def usage(self, days: int = 1, user: str | None = None) -> dict[str, Any]:
        """LLM tokens used per UTC day, user, flow and model over the last ``days``
        days, with their cost where ``token-cost`` prices the model:
        ``{"rows": [{"day", "user", "flow", "model", "in", "out", "requests",
        "cost"}]}``."""
        query = {"days": str(days), **({"user": user} if user else {})}
        return await self._http.get(USAGE_PATH, query)
