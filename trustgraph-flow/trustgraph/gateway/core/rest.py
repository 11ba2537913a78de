"""``POST /api/v1/flow/{flow}/service/{kind}`` (PROTOCOL §3): the body is the request
object. Without streaming the answer is one JSON body (the final response record);
with ``"streaming": true`` or ``Accept: application/x-ndjson`` it is NDJSON, one
record per line; ``Accept: text/event-stream`` gives the same records as SSE
``data:`` events.

``POST /api/v1/{kind}`` is the same for a service outside flows (config, the
librarian, collection-management, ...), as TrustGraph's client sends them: asked on
the row's own flow, with what the row says such a request means when it leaves a
field out (``ServiceRow.global_defaults``). Added after every other route, so it
takes only the paths no API module claimed.
"""
import json
from collections.abc import AsyncIterable
from contextlib import aclosing

from aiohttp import web

from .caller import Caller
from .dispatch import Dispatcher, Frame
from .errors import service_status
from .metrics import REQUESTS
from .responses import NDJSON, SSE, StreamFormat, json_body, streamed

SERVICE_PATH = "/api/v1/flow/{flow}/service/{kind}"
GLOBAL_PATH = "/api/v1/{kind}"


class ServiceRoute:
    def __init__(self, client: Dispatcher) -> None:
        self.client = client

    async def __call__(self, request: web.Request, caller: Caller) -> web.StreamResponse:
        kind, flow = request.match_info["kind"], request.match_info.get("flow")
        on_global_path = flow is None
        if flow is None:
            row = self.client.resolve_global(kind)
            flow = row.bus_flow("")
        else:
            row = self.client.resolve(kind, flow)
        body = await json_body(request)
        stream = _stream_format(request, body)
        if stream is not None and "streaming" in row.request_model.model_fields:
            body.setdefault("streaming", True)
        record = self.client.prepare(row, body)
        if on_global_path:
            record = row.as_global(record)
        REQUESTS.labels(row.name, "rest").inc()
        async with aclosing(self.client.frames(row, flow, record, caller=caller)) as batches:
            if stream is None:
                return await _single(batches)
            return await streamed(request, batches, stream)


def _stream_format(request: web.Request, body: dict) -> StreamFormat | None:
    accept = request.headers.get("Accept", "")
    if "text/event-stream" in accept:
        return SSE
    if "application/x-ndjson" in accept or body.get("streaming") is True:
        return NDJSON
    return None


async def _single(batches: AsyncIterable[list[Frame]]) -> web.Response:
    final = b"{}"
    async for batch in batches:
        final = batch[-1][0]
    # A service's own error comes back as its record, with the status of its type.
    error = json.loads(final).get("error")
    status = service_status(error.get("type", "")) if isinstance(error, dict) else 200
    return web.Response(body=final, status=status, content_type="application/json")
