"""HTTP answers shared by the REST routes: a JSON error with its status, the request
body, and streamed bodies (NDJSON lines or SSE events) that turn a failure after the
headers into the stream's last line.

Nothing is sent before the first batch arrives, so a failure before then still gets
its HTTP status; a client that goes away ends the stream, and closing the batches
(the caller's ``aclosing``) cancels the request on the bus.
"""
import json
from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass

from aiohttp import web

from .dispatch import Frame
from .errors import GatewayError, bad_request, classify, too_large
from .metrics import ERRORS


@dataclass(frozen=True)
class StreamFormat:
    content_type: str
    prefix: bytes
    suffix: bytes

    def encode(self, batch: list[Frame]) -> bytes:
        return b"".join(b"".join((self.prefix, data, self.suffix)) for data, _ in batch)


NDJSON = StreamFormat("application/x-ndjson", b"", b"\n")
SSE = StreamFormat("text/event-stream", b"data: ", b"\n\n")


def failed(exception: BaseException) -> GatewayError:
    """The one place an HTTP request's failure is classified (and counted)."""
    error = classify(exception)
    ERRORS.labels(error.type).inc()
    return error


def http_error(exception: BaseException) -> tuple[int, bytes]:
    """A failure as a status and a JSON body, ``{"error": {"type", "message"}}``."""
    error = failed(exception)
    return error.status, _body(error)


def _body(error: GatewayError) -> bytes:
    return json.dumps({"error": error.as_dict()}).encode()


def error_response(exception: BaseException) -> web.Response:
    error = failed(exception)
    headers = {}
    if error.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if error.retry_after is not None:
        headers["Retry-After"] = str(error.retry_after)
    return web.Response(body=_body(error), status=error.status,
                        content_type="application/json", headers=headers)


async def json_body(request: web.Request) -> dict:
    """The body as a JSON object, or the 400/413 saying why not."""
    try:
        data = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise too_large("the body", request.content_length, request.client_max_size,
                        "TG_GATEWAY_MAX_FRAME") from None
    try:
        body = json.loads(data) if data else None
    except (ValueError, RecursionError) as error:
        raise bad_request(f"body is not valid JSON: {error}") from None
    if not isinstance(body, dict):
        raise bad_request("body: must be a JSON object (the request)")
    return body


def error_record(exception: BaseException) -> bytes:
    """A failure after the headers, as the stream's last record: ``{"error": ...}``
    (a service stream's own shape; the answer stream's is ``answers.error_line``)."""
    return http_error(exception)[1]


async def streamed(request: web.Request, batches: AsyncIterable[list[Frame]],
                   stream: StreamFormat,
                   failure: Callable[[BaseException], bytes] = error_record
                   ) -> web.StreamResponse:
    """Write ``batches`` as they come; a failure before the first one is raised (for
    its HTTP status), after it becomes the last record, ``failure(exception)``."""
    response: web.StreamResponse | None = None
    try:
        async for batch in batches:
            if response is None:
                response = await _started(request, stream)
            await response.write(stream.encode(batch))
    except Exception as exception:
        if response is None:
            raise
        if not isinstance(exception, ConnectionError):
            await _finish(response, stream.encode([(failure(exception), True)]))
        return response  # a client that left: closing the batches cancels the request
    if response is None:  # no record at all: an empty stream
        response = await _started(request, stream)
    await _finish(response, b"")
    return response


async def _started(request: web.Request, stream: StreamFormat) -> web.StreamResponse:
    response = web.StreamResponse(headers={
        "Content-Type": stream.content_type, "Cache-Control": "no-cache"})
    await response.prepare(request)
    return response


async def _finish(response: web.StreamResponse, last: bytes) -> None:
    try:
        if last:
            await response.write(last)
        await response.write_eof()
    except ConnectionError:
        pass  # the client left after the last record
