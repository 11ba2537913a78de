"""``GET /api/v1/traces`` and ``/api/v1/explain``: the recent traces kept in the
data dir, one trace's spans, and the retrieval explanations kept with them
(docs/observability.md); what ``tg-list-traces``, ``tg-show-trace``,
``tg-list-explain-traces``, ``tg-show-explain-trace`` and the workbench read.

An admin reads every user's (or one user's: ``?user=``); any other caller only its
own (a trace is a user's when the gateway traced that user's request). The store is
the one the processes of this data dir write (``TG_DATA_DIR``/traces.db); with
tracing off, or nothing kept yet, the lists are empty and a trace is 404.
"""
import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

from aiohttp import web

from trustgraph.tracing import STORE_FILE
from trustgraph.tracing.reading import TraceReader

from ..core import Caller, Core, GatewayError, bad_request

TRACES = "/api/v1/traces"
EXPLAIN = "/api/v1/explain"
MAX_LIMIT = 1000
P = ParamSpec("P")
T = TypeVar("T")


class TraceRoutes:
    def __init__(self, path: Path) -> None:
        self.reader = TraceReader(path)
        self._lock = asyncio.Lock()  # one connection, read off the event loop

    async def _read(self, method: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        async with self._lock:
            return await asyncio.to_thread(method, *args, **kwargs)

    async def list_traces(self, request: web.Request, caller: Caller) -> web.Response:
        found = await self._read(self.reader.recent, _limit(request, 20),
                                 _whose(caller, request))
        return web.json_response({"traces": found})

    async def show_trace(self, request: web.Request, caller: Caller) -> web.Response:
        trace_id = request.match_info["trace_id"]
        found = await self._read(self.reader.trace, trace_id, _whose(caller))
        if found is None:
            raise _not_found("trace", trace_id)
        return web.json_response(found)

    async def list_explanations(self, request: web.Request, caller: Caller) -> web.Response:
        found = await self._read(self.reader.explanations, _limit(request, 50),
                                 _whose(caller, request),
                                 request.query.get("collection") or None)
        return web.json_response({"explanations": found})

    async def show_explanation(self, request: web.Request, caller: Caller) -> web.Response:
        trace_id = request.match_info["trace_id"]
        found = await self._read(self.reader.explanation, trace_id, _whose(caller))
        if found is None:
            raise _not_found("explanation", trace_id)
        return web.json_response(found)


def _whose(caller: Caller, request: web.Request | None = None) -> str | None:
    """Whose traces to read: an admin's choice (``?user=``; none: every user's),
    anyone else's own."""
    if caller.role == "admin":
        return request.query.get("user") or None if request is not None else None
    return caller.user


def _limit(request: web.Request, default: int) -> int:
    text = request.query.get("limit", str(default))
    if not text.isdigit() or not 0 < int(text) <= MAX_LIMIT:
        raise bad_request(f"limit: a whole number from 1 to {MAX_LIMIT}")
    return int(text)


def _not_found(what: str, trace_id: str) -> GatewayError:
    return GatewayError("not-found", f"no {what} {trace_id!r} is kept here (traces are "
                        f"kept while the store's size allows: TG_TRACE_STORE_MB)", 404)


def install(core: Core) -> None:
    routes = TraceRoutes(Path(core.settings.tg_data_dir) / STORE_FILE)
    core.route("GET", TRACES, routes.list_traces)
    core.route("GET", f"{TRACES}/{{trace_id}}", routes.show_trace)
    core.route("GET", EXPLAIN, routes.list_explanations)
    core.route("GET", f"{EXPLAIN}/{{trace_id}}", routes.show_explanation)
