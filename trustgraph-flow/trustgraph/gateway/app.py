"""The gateway process: websocket and REST in front of the bus.

``Gateway(settings)`` serves ``/api/v1/socket`` (PROTOCOL §1), ``/api/v1/flow/{flow}/
service/{kind}``, the answer-stream API ``/api/v1/query`` and LazyRAG's
``/api/v1/lazy-rag/...`` (§3), ``/api/v1/openapi.json``, ``/metrics`` and the
workbench page at ``/``: the core (``core/``) and the API modules (``apis/``), put
together here. ``main`` is its console entry (``tg-run gateway``).
"""
import asyncio
import gc
import logging
import signal
import sys

from aiohttp import web

from trustgraph.base import exit_process, freeze_startup_heap, load_settings
from trustgraph.base.settings import start_tracing
from trustgraph.pubsub import Bus
from trustgraph.schema import CANCEL_TOPIC
from trustgraph.schema.lazy_rag import LazyRagOptions

from .apis import APIS
from .core import Core, CoreSettings
from .core.http_errors import AppRunner

log = logging.getLogger(__name__)

# On shutdown, HTTP requests in flight get this long to finish before they are
# cancelled (and their bus requests with them); websockets are closed at once.
SHUTDOWN_GRACE = 5.0


class GatewaySettings(CoreSettings, LazyRagOptions):
    """The core's settings and the APIs' own, read once: LazyRAG's ``LAZY_RAG_*`` (as
    tg-start's, so that its gateway agrees with whether it started the service)."""


class Gateway:
    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        self.url = ""
        self.core: Core | None = None
        self._bus: Bus | None = None
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
        self.core = core = Core(self._bus, settings)
        for install in APIS:
            install(core)
        await core.start()  # the API keys read before the first request is taken
        # handler_cancellation: a client that drops an HTTP request cancels its handler,
        # and so the request on the bus and the LLM stream behind it.
        self._runner = AppRunner(core.application(), handler_cancellation=True,
                                 access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, settings.tg_gateway_host, settings.tg_gateway_port)
        await site.start()
        self.url = _base_url(settings.tg_gateway_host, self._runner.addresses[0][1])
        log.info("gateway listening on %s (websocket ws%sapi/v1/socket); flows %s; bus %s",
                 self.url, self.url.removeprefix("http"), ",".join(core.client.flows),
                 settings.pulsar_url)
        if core.auth.open:
            log.warning("gateway is OPEN: no TG_GATEWAY_TOKEN, no JWT key and no API key, so "
                        "anyone on this machine may use %s as its admin (other machines "
                        "are refused); create a key with tg-add-user and tg-create-key",
                        self.url)
        return self.url

    def routes(self) -> set[tuple[str, str]]:
        """``(method, path)`` of every route served, e.g. ``("POST", "/api/v1/query")``."""
        assert self._runner is not None, "not started"
        return {(route.method, route.resource.canonical)
                for route in self._runner.app.router.routes() if route.resource is not None}

    async def stop(self) -> None:
        """Close live websockets (cancelling their requests), stop serving, leave the bus."""
        if self.core is not None:
            await self.core.close(SHUTDOWN_GRACE)
        if self._runner is not None:
            await self._runner.cleanup()
        if self._bus is not None:
            await self._bus.close()
        self.core = self._runner = self._bus = None


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
    start_tracing(settings, "gateway")
    asyncio.run(serve_until_stopped(Gateway(settings)))
    exit_process(0)  # stopped cleanly: no interpreter finalization (base/exiting.py)
