"""The REST routes (PROTOCOL §3) and what they share: auth, and the requests in
flight, which shutdown drains.

``POST /api/v1/flow/{flow}/service/{kind}``: the body is the request object. Without
streaming the answer is one JSON body (the final response record); with
``"streaming": true`` or ``Accept: application/x-ndjson`` it is NDJSON, one record per
line; ``Accept: text/event-stream`` gives the same records as SSE ``data:`` events.

``POST /api/v1/query`` (and ``/query``): the answer-stream API, in ``answers.py``.
"""
import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing

from aiohttp import web

from .answers import answer
from .auth import Auth
from .dispatch import Dispatcher
from .errors import service_status
from .framing import Frame
from .metrics import REQUESTS
from .responses import NDJSON, SSE, StreamFormat, error_response, json_body, streamed


class RestEndpoint:
    def __init__(self, dispatcher: Dispatcher, auth: Auth) -> None:
        self.dispatcher = dispatcher
        self.auth = auth
        self._handlers: set[asyncio.Task] = set()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """``/api/v1/flow/{flow}/service/{kind}``"""
        return await self._served(request, self._service)

    async def query(self, request: web.Request) -> web.StreamResponse:
        """``/api/v1/query``"""
        return await self._served(request, lambda r: answer(self.dispatcher, r))

    def served(self, route: Callable[[web.Request], Awaitable[web.StreamResponse]]
               ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        """Another REST route, served as these are: auth, drained at shutdown, its
        failures as HTTP statuses with JSON bodies."""
        async def handle(request: web.Request) -> web.StreamResponse:
            return await self._served(request, route)
        return handle

    async def drain(self, grace: float) -> None:
        """Give the requests in flight ``grace`` seconds, then cancel the rest (and
        so their bus requests)."""
        if not self._handlers:
            return
        _, late = await asyncio.wait(set(self._handlers), timeout=grace)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late, timeout=grace)

    async def _served(self, request: web.Request,
                      route: Callable[[web.Request], Awaitable[web.StreamResponse]]
                      ) -> web.StreamResponse:
        """Auth, then the route; tracked so shutdown can drain it, and any failure
        that escapes becomes its HTTP status with a JSON body."""
        task = asyncio.current_task()
        self._handlers.add(task)
        try:
            self.auth.check(request)
            return await route(request)
        except Exception as exception:
            return error_response(exception)
        finally:
            self._handlers.discard(task)

    async def _service(self, request: web.Request) -> web.StreamResponse:
        flow = request.match_info["flow"]
        row = self.dispatcher.resolve(request.match_info["kind"], flow)
        body = await json_body(request)
        stream = _stream_format(request, body)
        if stream is not None and "streaming" in row.request_model.model_fields:
            body.setdefault("streaming", True)
        record = self.dispatcher.prepare(row, body)
        REQUESTS.labels(row.name, "rest").inc()
        async with aclosing(self.dispatcher.frames(row, flow, record)) as batches:
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


async def _single(batches: AsyncIterator[list[Frame]]) -> web.Response:
    final = b"{}"
    async for batch in batches:
        final = batch[-1][0]
    # A service's own error comes back as its record, with the status of its type.
    error = json.loads(final).get("error")
    status = service_status(error.get("type", "")) if isinstance(error, dict) else 200
    return web.Response(body=final, status=status, content_type="application/json")
