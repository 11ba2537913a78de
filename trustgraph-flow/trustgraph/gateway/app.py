"""The gateway process: websocket and REST in front of the bus.

``Gateway(settings)`` serves ``/api/v1/socket`` (PROTOCOL §1), ``/api/v1/flow/{flow}/
service/{kind}``, the answer-stream API ``/api/v1/query`` and LazyRAG's
``/api/v1/lazy-rag/...`` (§3), ``/api/v1/openapi.json``, ``/metrics`` and the
workbench page at ``/`` (``page.py``); ``main`` is its console entry
(``tg-run gateway``).
"""
import asyncio
import gc
import logging
import signal
import sys
from typing import Annotated

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import field_validator
from pydantic_settings import NoDecode

from trustgraph.base import Settings, freeze_startup_heap, load_settings
from trustgraph.pubsub import DEFAULT_PULSAR_URL, Bus
from trustgraph.schema import CANCEL_TOPIC

from .answers import QUERY_PATHS
from .auth import Auth
from .cores import CoreEndpoint, add_core_routes
from .dispatch import MAX_RECORD_BYTES, Dispatcher
from .errors import GatewayError
from .http_errors import AppRunner, json_errors
from .lazy_rag import LAZY_RAG_PATH, LazyRagEndpoint, LazyRagSettings
from .openapi import openapi
from .page import add_page_routes
from .responses import error_response
from .rest import RestEndpoint
from .services import LAZY_RAG_SERVICES, SERVICES
from .websocket import Limits, SocketEndpoint

log = logging.getLogger(__name__)

# On shutdown, HTTP requests in flight get this long to finish before they are
# cancelled (and their bus requests with them); websockets are closed at once.
SHUTDOWN_GRACE = 5.0


class GatewaySettings(Settings):
    pulsar_url: str = DEFAULT_PULSAR_URL
    tg_gateway_host: str = "127.0.0.1"
    tg_gateway_port: int = 8888
    tg_gateway_token: str = ""  # empty: open, no auth
    tg_flows: Annotated[list[str], NoDecode] = ["default"]
    tg_request_timeout: float = 120.0  # seconds of silence between response records
    tg_gateway_max_inflight: int = 256  # concurrent requests per websocket
    # bytes per client frame or body: by default what one broker message carries,
    # so the limit a client is told is the one that holds
    tg_gateway_max_frame: int = MAX_RECORD_BYTES
    tg_metrics_open: bool = False  # /metrics without the token even when one is set
    # false: the lazy-rag services are refused (404 saying how to enable them) on every
    # transport, and /api/v1/lazy-rag/status says so; as tg-start's, so that its
    # gateway agrees with whether it started the service
    lazy_rag_enabled: bool = True

    @field_validator("tg_flows", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        return value


class Gateway:
    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        self.url = ""
        self._bus: Bus | None = None
        self.dispatcher: Dispatcher | None = None
        self._sockets: SocketEndpoint | None = None
        self._rest: RestEndpoint | None = None
        self._runner: web.AppRunner | None = None

    async def start(self) -> str:
        """Connect to the bus and listen; returns the base URL, e.g. ``http://127.0.0.1:8888/``."""
        try:
            return await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> str:
        settings = self.settings
        self._bus = Bus(settings.pulsar_url)
        # Connect now: a broker that is not there fails the start rather than the first
        # request, and a pulsar client closed without ever having connected crashes
        # the process at exit (pulsar-client 3.x).
        await self._bus.producer(CANCEL_TOPIC)
        off = () if settings.lazy_rag_enabled else LAZY_RAG_SERVICES
        self.dispatcher = dispatcher = Dispatcher(self._bus, settings.tg_flows,
                                                  settings.tg_request_timeout, off)
        auth = Auth(settings.tg_gateway_token)
        self._sockets = SocketEndpoint(dispatcher, auth, Limits(
            settings.tg_gateway_max_inflight, settings.tg_gateway_max_frame))
        self._rest = RestEndpoint(dispatcher, auth)
        lazy = LazyRagEndpoint(dispatcher, LazyRagSettings())
        app = _application(self._sockets, self._rest, lazy, dispatcher.flows,
                           settings.tg_gateway_max_frame,
                           None if settings.tg_metrics_open else auth)
        # handler_cancellation: a client that drops an HTTP request cancels its handler,
        # and so the request on the bus and the LLM stream behind it.
        self._runner = AppRunner(app, handler_cancellation=True, access_log=None,
                                 shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, settings.tg_gateway_host, settings.tg_gateway_port)
        await site.start()
        self.url = _base_url(settings.tg_gateway_host, self._runner.addresses[0][1])
        log.info("gateway listening on %s (websocket ws%sapi/v1/socket); flows %s; bus %s",
                 self.url, self.url.removeprefix("http"), ",".join(dispatcher.flows),
                 settings.pulsar_url)
        if auth.open:
            log.warning("gateway is OPEN (no auth): no TG_GATEWAY_TOKEN is set, so anyone "
                        "who can reach %s can use it", self.url)
        return self.url

    def routes(self) -> set[tuple[str, str]]:
        """``(method, path)`` of every route served, e.g. ``("POST", "/api/v1/query")``."""
        return {(route.method, route.resource.canonical)
                for route in self._runner.app.router.routes()}

    async def stop(self) -> None:
        """Close live websockets (cancelling their requests), stop serving, leave the bus."""
        if self._sockets is not None:
            await self._sockets.close_all()
        if self._rest is not None:
            await self._rest.drain(SHUTDOWN_GRACE)
        if self._runner is not None:
            await self._runner.cleanup()
        if self._bus is not None:
            await self._bus.close()
        self._sockets = self._rest = self._runner = self._bus = None


def _application(sockets: SocketEndpoint, rest: RestEndpoint, lazy: LazyRagEndpoint,
                 flows: tuple[str, ...], max_body: int, metrics_auth: Auth | None
                 ) -> web.Application:
    """``metrics_auth``: the token /metrics needs (None: open)."""
    spec = openapi(SERVICES.values(), flows)

    async def openapi_json(request: web.Request) -> web.Response:
        return web.json_response(spec)

    async def metrics(request: web.Request) -> web.Response:
        try:
            if metrics_auth is not None:
                metrics_auth.check(request)
        except GatewayError as error:
            return error_response(error)
        return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application(client_max_size=max_body, middlewares=[json_errors])
    app.router.add_get("/api/v1/socket", sockets.handle)
    app.router.add_post("/api/v1/flow/{flow}/service/{kind}", rest.handle)
    for path in QUERY_PATHS:
        app.router.add_post(path, rest.query)
    app.router.add_post(f"{LAZY_RAG_PATH}/query", rest.served(lazy.query))
    app.router.add_post(f"{LAZY_RAG_PATH}/expand", rest.served(lazy.expand))
    app.router.add_get(f"{LAZY_RAG_PATH}/status", rest.served(lazy.status))
    add_core_routes(app, CoreEndpoint(rest.dispatcher), rest.served)
    app.router.add_get("/api/v1/openapi.json", openapi_json)
    app.router.add_get("/metrics", metrics)
    add_page_routes(app)
    return app


def _base_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


async def serve_until_stopped(gateway: Gateway) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await gateway.start()
    freeze_startup_heap()
    try:
        await stop.wait()
    finally:
        log.info("gateway stopping")
        await gateway.stop()
        # Free the pulsar client's objects now, while the loop runs: left to
        # interpreter shutdown, their C++ threads can abort the process (pulsar-client 3.x).
        gc.collect()


def main(argv: list[str] | None = None) -> None:
    settings = load_settings(GatewaySettings, sys.argv[1:] if argv is None else argv, "gateway")
    asyncio.run(serve_until_stopped(Gateway(settings)))
