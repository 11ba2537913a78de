"""``POST /api/v1/flow/{flow}/service/{kind}`` (PROTOCOL §3).

The body is the request object. Without streaming the answer is one JSON body (the
final response record); with ``"streaming": true`` or ``Accept:
application/x-ndjson`` it is NDJSON, one record per line; ``Accept:
text/event-stream`` gives the same records as SSE ``data:`` events. Nothing is sent
before the first record arrives, so early failures get a proper HTTP status.
"""
import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass

from aiohttp import web

from .auth import Auth
from .dispatch import Dispatcher
from .errors import GatewayError, bad_request, classify
from .framing import Frame
from .metrics import ERRORS, REQUESTS


@dataclass(frozen=True)
class StreamFormat:
    content_type: str
    prefix: bytes
    suffix: bytes

    def encode(self, batch: list[Frame]) -> bytes:
        return b"".join(b"".join((self.prefix, data, self.suffix)) for data, _ in batch)


NDJSON = StreamFormat("application/x-ndjson", b"", b"\n")
SSE = StreamFormat("text/event-stream", b"data: ", b"\n\n")


def http_error(exception: BaseException) -> tuple[int, bytes]:
    """The one place an HTTP request's failure becomes a status and a JSON body."""
    error = classify(exception)
    ERRORS.labels(error.type).inc()
    return error.status, json.dumps({"error": error.as_dict()}).encode()


class RestEndpoint:
    def __init__(self, dispatcher: Dispatcher, auth: Auth) -> None:
        self.dispatcher = dispatcher
        self.auth = auth
        self._handlers: set[asyncio.Task] = set()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        task = asyncio.current_task()
        self._handlers.add(task)
        try:
            return await self._handle(request)
        finally:
            self._handlers.discard(task)

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

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            self.auth.check(request)
            flow = request.match_info["flow"]
            row = self.dispatcher.resolve(request.match_info["kind"], flow)
            body = await _json_body(request)
            stream = _stream_format(request, body)
            if stream is not None and "streaming" in row.request_model.model_fields:
                body.setdefault("streaming", True)
            record = self.dispatcher.prepare(row, body)
            REQUESTS.labels(row.name, "rest").inc()
            async with aclosing(self.dispatcher.frames(row, flow, record)) as batches:
                if stream is None:
                    return await _single(batches)
                return await _streamed(request, batches, stream)
        except Exception as exception:
            status, body = http_error(exception)
            headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
            return web.Response(body=body, status=status, content_type="application/json",
                                headers=headers)


async def _json_body(request: web.Request) -> dict:
    try:
        data = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise GatewayError("too-large", "body exceeds the gateway's size limit "
                           "(TG_GATEWAY_MAX_FRAME)", 413) from None
    try:
        body = json.loads(data) if data else None
    except (ValueError, RecursionError) as error:
        raise bad_request(f"body is not valid JSON: {error}") from None
    if not isinstance(body, dict):
        raise bad_request("body: must be a JSON object (the request)")
    return body


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
    # A service's own error comes back as its record, with 502.
    failed = json.loads(final).get("error") is not None
    return web.Response(body=final, status=502 if failed else 200,
                        content_type="application/json")


async def _streamed(request: web.Request, batches: AsyncIterator[list[Frame]],
                    stream: StreamFormat) -> web.StreamResponse:
    response = None
    try:
        async for batch in batches:
            if response is None:
                response = web.StreamResponse(headers={
                    "Content-Type": stream.content_type, "Cache-Control": "no-cache"})
                await response.prepare(request)
            await response.write(stream.encode(batch))
    except ConnectionError:
        return response  # the client left; closing the frames cancels the request
    except Exception as exception:
        if response is None:
            raise
        # Headers are gone already: the failure becomes the stream's last line.
        await _finish(response, stream.encode([(http_error(exception)[1], True)]))
        return response
    await _finish(response, b"")
    return response


async def _finish(response: web.StreamResponse, last: bytes) -> None:
    try:
        if last:
            await response.write(last)
        await response.write_eof()
    except ConnectionError:
        pass  # the client left after the last record
