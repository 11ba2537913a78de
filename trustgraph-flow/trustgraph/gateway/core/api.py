"""The core as the API modules see it, and how each adds itself to the gateway.

An API module (``gateway/apis/``) is one function, ``install(core)``: it asks
services through ``core.client`` (the ``Dispatcher``), adds its routes with
``core.route`` and its part of the OpenAPI document with ``core.document``, and
may declare services optional or watch their answers (``core.client.optional``,
``core.client.observe``). It never touches the bus.

Every route is served the same way (``Core.served``): who is asking is decided
first (``Auth.identify``), unless the route is public, and a route may be for some
roles only (``/metrics``: admins); a failure becomes its HTTP status with a JSON
body (the gateway's ``{"error": {"type", "message"}}``, or the route's own shape: an
API speaking another protocol's errors gives ``errors``); and the request is
tracked, so shutdown can drain it. What the caller may ask of services is decided
where every request passes, ``core.client.frames``, given the ``Caller`` the handler
receives. The core's own routes are the websocket, the service paths (of a flow's
services, and of those outside flows at ``/api/v1/{kind}``), ``/api/v1/whoami``,
``/metrics`` and ``/api/v1/status``. A module that needs something running while the
gateway serves (a task group of its own) gives ``core.background`` an async context
manager: entered at start, left at stop, both in one task.
"""
import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from aiohttp import web

from trustgraph.pubsub import Bus
from trustgraph.schema import Role
from trustgraph.schema.state import ProcessorState

from .access import forbidden
from .auth import Auth, presented_token, whoami
from .caller import PUBLIC, Caller
from .dispatch import Dispatcher
from .http_errors import json_errors
from .jwt_auth import JwtSettings, JwtVerifier
from .keyring import KeyRing
from .limits import Limiter, Limits
from .metrics import scrape
from .openapi import Document, services_document
from .permissions import ADMINS, EVERYONE
from .responses import error_response
from .rest import GLOBAL_PATH, SERVICE_PATH, ServiceRoute
from .services import SERVICES
from .settings import CoreSettings
from .states import ProcessorStates
from .status import STATUS, StatusRoute
from .traced import http_scope, on_prepare, stamp
from .usage import UsageLedger
from .websocket import Limits as SocketLimits
from .websocket import SocketEndpoint

Handler = Callable[[web.Request, Caller], Awaitable[web.StreamResponse]]
ErrorResponse = Callable[[BaseException], web.Response]  # a failure as its HTTP answer


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    public: bool = False  # answered without asking who is asking (the page, the document)
    roles: frozenset[Role] = EVERYONE  # who may (what they may ask of services: frames)
    errors: ErrorResponse = error_response  # how a failure is answered


class Core:
    def __init__(self, bus: Bus, settings: CoreSettings) -> None:
        self.settings = settings  # the gateway's: they include every API's own
        self._bus = bus
        limiter = Limiter()
        ledger = UsageLedger(settings.tg_metrics_max_series)
        self.client = Dispatcher(bus, settings.tg_flows, settings.tg_request_timeout,
                                 limiter, ledger)
        defaults = Limits(settings.tg_key_concurrent, settings.tg_key_per_minute,
                          settings.tg_key_tokens_per_day)
        # What the processors say about themselves (GET /api/v1/status), and the
        # gateway's own record, heard back as the broker's check.
        self.states = ProcessorStates(bus, self.client.owner, settings.tg_state_period,
                                      self._own_state)
        self._publishing: asyncio.Task | None = None
        self.keys = KeyRing(bus, self.client.owner, limiter, defaults,
                            settings.tg_usage_report, ledger) \
            if settings.tg_gateway_keys else None
        self.auth = Auth(settings.tg_gateway_token, self.keys, _jwt(settings, defaults))
        self.sockets = SocketEndpoint(self.client, self.auth, SocketLimits(
            settings.tg_gateway_max_inflight, settings.tg_gateway_max_frame))
        self.routes: list[Route] = []
        self._background: list[Callable[[], AbstractAsyncContextManager[object]]] = []
        self.documents = [services_document(SERVICES.values(), self.client.flows)]
        self._started = time.time()
        self._handlers: set[asyncio.Task] = set()
        self.route("POST", SERVICE_PATH, ServiceRoute(self.client))
        self._global = Route("POST", GLOBAL_PATH, ServiceRoute(self.client))
        self.route("GET", "/api/v1/whoami", whoami)
        self.route("GET", "/metrics", scrape, public=settings.tg_metrics_open, roles=ADMINS)
        self.route("GET", STATUS, StatusRoute(self.client.flows, self.states), roles=ADMINS)

    async def start(self) -> None:
        """Read the running flows and the API keys (waiting up to ``tg_config_wait``
        for the config service; until they are read, keys are answered 503)."""
        wait = self.settings.tg_config_wait
        await self.states.start()
        await asyncio.gather(self.client.start(wait),
                             *([self.keys.start(wait)] if self.keys is not None else []),
                             *([] if self.client.flows.pinned else [
                                 self.client.ledger.follow_prices(self._bus, self.client.owner,
                                                                  wait)]))
        self._publishing = asyncio.create_task(self.states.publisher.run(), name="state")

    def _own_state(self) -> ProcessorState:
        return ProcessorState(processor="gateway", instance=self.client.owner,
                              process="gateway", started=self._started,
                              flows=list(self.client.flows), in_flight=self.client.in_flight())

    def route(self, method: str, path: str, handler: Handler, public: bool = False,
              roles: frozenset[Role] = EVERYONE,
              errors: ErrorResponse = error_response) -> None:
        self.routes.append(Route(method, path, handler, public, roles, errors))

    def background(self, running: Callable[[], AbstractAsyncContextManager[object]]) -> None:
        """Keep ``running()`` entered while the gateway serves."""
        self._background.append(running)

    def document(self, document: Document) -> None:
        self.documents.append(document)

    def application(self) -> web.Application:
        app = web.Application(client_max_size=self.settings.tg_gateway_max_frame,
                              middlewares=[json_errors])
        app.on_response_prepare.append(on_prepare)  # a streamed answer's traceparent
        app.router.add_get("/api/v1/socket", self.sockets.handle)
        for running in self._background:
            app.cleanup_ctx.append(_in_own_task(running))
        # The services outside flows at /api/v1/{kind} last: it takes only the paths
        # no other route claimed (aiohttp matches routes in the order they were added).
        for route in (*self.routes, self._global):
            if route.method == "GET":
                app.router.add_get(route.path, self.served(route))  # and HEAD
            else:
                app.router.add_route(route.method, route.path, self.served(route))
        return app

    def served(self, route: Route) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            task = asyncio.current_task()
            assert task is not None  # aiohttp runs each handler in a task of its own
            self._handlers.add(task)
            scope = http_scope(route.method, route.path, request.headers)  # its trace starts here
            response: web.StreamResponse | None = None
            try:
                caller = PUBLIC if route.public else self.auth.identify(
                    presented_token(request), peer=request.remote)
                if not route.public and caller.role not in route.roles:
                    raise forbidden(f"role {caller.role!r} may not use {route.path}")
                response = await route.handler(request, caller)
                return response
            except web.HTTPException:
                raise  # aiohttp's own answer (an unknown asset): JSON from the middleware
            except asyncio.CancelledError:  # the client went away
                if scope is not None:
                    scope.cancelled()
                raise
            except Exception as exception:
                if scope is not None:
                    scope.failed(type(exception).__name__, str(exception))
                response = route.errors(exception)
                return response
            finally:
                self._handlers.discard(task)
                if scope is not None:
                    if response is not None:
                        stamp(response, scope)
                    scope.close()
        return handle

    async def close(self, grace: float) -> None:
        """Close the websockets (cancelling their requests), then give the HTTP
        requests in flight ``grace`` seconds and cancel the rest (and so their bus
        requests), and report how the keys were used."""
        await self.sockets.close_all()
        if self._publishing is not None:
            self._publishing.cancel()
            await asyncio.gather(self._publishing, return_exceptions=True)
            await self.states.publisher.send(up=False)
        if self._handlers:
            _, late = await asyncio.wait(set(self._handlers), timeout=grace)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=grace)
        if self.keys is not None:
            await self.keys.close()
        self.client.flows.close()
        self.client.ledger.close()


def _jwt(settings: CoreSettings, limits: Limits) -> JwtVerifier | None:
    if not settings.tg_jwt_key_file:
        return None
    return JwtVerifier(JwtSettings(
        settings.tg_jwt_key_file, tuple(settings.tg_jwt_algorithms), settings.tg_jwt_issuer,
        settings.tg_jwt_audience, settings.tg_jwt_user_claim, settings.tg_jwt_role_claim),
        limits)


def _in_own_task(running: Callable[[], AbstractAsyncContextManager[object]]
                 ) -> Callable[[web.Application], AsyncIterator[None]]:
    """``running()`` as an aiohttp cleanup context, entered and left in a task of its
    own: aiohttp may start and clean up an application from different tasks, and a
    context holding a task group (anyio's) must be left in the task that entered it."""
    async def entered(app: web.Application) -> AsyncIterator[None]:
        started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        stop = asyncio.Event()

        async def hold() -> None:
            try:
                async with running():
                    started.set_result(None)
                    await stop.wait()
            except BaseException as error:
                if not started.done():
                    started.set_exception(error)
                raise

        task = asyncio.create_task(hold())
        await started
        try:
            yield
        finally:
            stop.set()
            await task

    return entered
