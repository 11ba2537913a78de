"""The workbench page's two routes on a plain aiohttp app, as the gateway serves them
(public: no caller), for tests that need the page without a gateway."""
from pathlib import Path

from aiohttp import web

from trustgraph.gateway.apis.page import WORKBENCH, Page
from trustgraph.gateway.core.caller import PUBLIC


def add_page_routes(app: web.Application, workbench: Path = WORKBENCH) -> None:
    page = Page(workbench)

    async def index(request: web.Request) -> web.Response:
        return await page.index(request, PUBLIC)

    async def asset(request: web.Request) -> web.Response:
        return await page.asset(request, PUBLIC)

    app.router.add_get("/", index)
    app.router.add_get("/assets/{name}", asset)
