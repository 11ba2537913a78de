"""What a client reads of the traces a gateway's data dir keeps
(docs/observability.md): the recent traces, one trace's spans, and the retrieval
explanations kept with RAG answers. ``AsyncTrustGraph`` has these methods; they
are plain REST reads (``GET /api/v1/traces``, ``/api/v1/explain``)."""
from typing import Any
from urllib.parse import quote

from .http import GatewayHttp

TRACES_PATH = "/api/v1/traces"
EXPLAIN_PATH = "/api/v1/explain"


class TraceCalls:
    _http: GatewayHttp

    async def traces(self, limit: int = 20, user: str | None = None) -> list[dict[str, Any]]:
        """The latest traces, newest first: ``trace_id``, ``start``, ``duration_ms``,
        ``root`` (its first span's name), ``user``, ``spans``, ``errors``. ``user``:
        only that user's (an admin's choice; anyone else reads only their own)."""
        query = {"limit": str(limit), **({"user": user} if user else {})}
        return (await self._http.get(TRACES_PATH, query))["traces"]

    async def trace(self, trace_id: str) -> dict[str, Any]:
        """One trace: ``{"trace_id", "start", "spans": [...], "explained"}``, each span
        with ``span_id``, ``parent_id``, ``name``, ``service``, ``kind``, ``start_ms``
        (from the trace's start), ``duration_ms``, ``status``, ``attributes``."""
        return await self._http.get(f"{TRACES_PATH}/{quote(trace_id, safe='')}")

    async def explanations(self, limit: int = 50, collection: str | None = None,
                           user: str | None = None) -> list[dict[str, Any]]:
        """The latest RAG answers with an explanation, newest first: ``trace_id``,
        ``time``, ``service``, ``user``, ``collection``, ``question``."""
        query = {"limit": str(limit), **({"collection": collection} if collection else {}),
                 **({"user": user} if user else {})}
        return (await self._http.get(EXPLAIN_PATH, query))["explanations"]

    async def explanation(self, trace_id: str) -> dict[str, Any]:
        """Why an answer cited what it cited: the question as asked and rewritten,
        ``seeds``, ``candidates`` (each with its ``scores`` and ``kept``), the prompt's
        ``template`` and ``prompt_chars``, the ``model`` and tokens."""
        return await self._http.get(f"{EXPLAIN_PATH}/{quote(trace_id, safe='')}")
