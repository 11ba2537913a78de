"""aiohttp's own HTTP errors as the gateway's JSON errors (PROTOCOL §3).

aiohttp answers some requests itself, in plain text: 404 for a path no route has,
405 for a method a route does not take (both raised as exceptions a middleware can
catch), and 400 for a request it cannot parse at all (an over-long request line,
bad headers: answered by the connection handler before any route, and its text
quotes the offending line). Here both become ``{"error": {"type", "message"}}``
with the same status, and no message repeats what the client sent.
"""
import logging

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from .errors import GatewayError
from .responses import error_response

log = logging.getLogger(__name__)

# Fixed words per status: what aiohttp would say may quote the request.
_ERRORS = {
    400: ("bad-request", "the request was refused as malformed (e.g. a websocket path "
                         "asked without the upgrade)"),
    404: ("not-found", "no such path; the routes are listed at /api/v1/openapi.json"),
    405: ("method-not-allowed", "this path does not take that method"),
    413: ("too-large", "the request body is too large"),
    500: ("gateway-error", "the gateway could not serve this request"),
    504: ("timeout", "the gateway timed out serving this request"),
}


# What the connection handler answers for a request it could not parse.
_UNPARSED = ("bad-request", "the request is not valid HTTP (a request line or header "
                            "too long or malformed)")


def as_json(status: int, headers=None, unparsed: bool = False) -> web.Response:
    kind, message = _ERRORS.get(status, ("http-error", f"HTTP {status}"))
    if unparsed and status == 400:
        kind, message = _UNPARSED
    response = error_response(GatewayError(kind, message, status))
    if headers and "Allow" in headers:  # a 405 says which methods the path takes
        response.headers["Allow"] = headers["Allow"]
    return response


@web.middleware
async def json_errors(request: web.Request, handler) -> web.StreamResponse:
    """Routing's 404 and 405 (and any other HTTP error a handler raises) as JSON."""
    try:
        return await handler(request)
    except web.HTTPException as exception:
        if exception.status < 400:
            raise  # a redirect is not an error
        return as_json(exception.status, exception.headers)


class _Handler(RequestHandler):
    def handle_error(self, request, status: int = 500, exc=None, message=None):
        # As aiohttp's: nothing can be answered once part of an answer is out.
        if request.writer.output_size > 0:
            raise ConnectionError("an answer was being sent; cannot send an error")
        # A client's garbage is not the gateway's error: logged quietly (aiohttp logs
        # each with a traceback), while anything unexpected is logged in full.
        if status < 500:
            log.info("HTTP %d for a request that is not valid HTTP: %.200s", status, message)
        else:
            log.error("HTTP %d serving a request", status, exc_info=exc)
        response = as_json(status, unparsed=True)
        response.force_close()
        return response


class _Server(web.Server):
    def __call__(self) -> RequestHandler:
        return _Handler(self, loop=self._loop, **self._kwargs)


class AppRunner(web.AppRunner):
    """aiohttp's runner, with the connection handler that answers errors in JSON
    (aiohttp has no public hook for the requests that never reach a route)."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        return _Server(server.request_handler, request_factory=server.request_factory,
                       handler_cancellation=server.handler_cancellation, loop=server._loop,
                       **server._kwargs)
