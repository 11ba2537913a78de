"""The workbench page at ``/``: ``workbench/src/index.html`` with the hashed names of
the built assets filled in, and the assets themselves, ``workbench/dist`` (committed,
so serving needs no Node; ``make workbench`` rebuilds them); read once at start.

The page and its assets need no token: they hold no data, and the page asks the
user for the token the API calls need (docs/workbench.md). Assets have content
hashes in their names, so they are cached for good; ``index.html`` is revalidated
on every load so a new build is picked up at once. The CSP allows only the
gateway's own scripts, styles and sockets: model text the sanitiser missed still
could not run a script, and no asset comes from anywhere else.
"""
import gzip
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from ..core import Caller, Core

WORKBENCH = Path(__file__).parents[1] / "workbench"
DIST = WORKBENCH / "dist"
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".txt": "text/plain; charset=utf-8",
         ".json": "application/json"}
SECURITY = {
    # Cytoscape sets inline styles on its canvas, hence 'unsafe-inline' for styles only.
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; "
                               "style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
                               "connect-src 'self'; object-src 'none'; base-uri 'none'; "
                               "form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
IMMUTABLE = "public, max-age=31536000, immutable"
_ASSET_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


@dataclass(frozen=True)
class Asset:
    body: bytes
    gzipped: bytes
    content_type: str
    etag: str

    @classmethod
    def of(cls, body: bytes, suffix: str) -> "Asset":
        return cls(body, gzip.compress(body, mtime=0),
                   TYPES.get(suffix, "application/octet-stream"),
                   '"' + hashlib.sha256(body).hexdigest()[:20] + '"')

    @classmethod
    def read(cls, path: Path) -> "Asset":
        return cls.of(path.read_bytes(), path.suffix)

    def response(self, request: web.Request, cache: str) -> web.Response:
        headers = {"Cache-Control": cache, "ETag": self.etag, "Vary": "Accept-Encoding",
                   **SECURITY}
        if request.headers.get("If-None-Match") == self.etag:
            return web.Response(status=304, headers=headers)
        body = self.body
        if "gzip" in request.headers.get("Accept-Encoding", "") and len(self.body) > 1024:
            body, headers["Content-Encoding"] = self.gzipped, "gzip"
        return web.Response(body=body, headers={**headers, "Content-Type": self.content_type})


def install(core: Core) -> None:
    """``GET /`` (the page) and ``GET /assets/{name}`` (its files): no token needed."""
    page = Page(WORKBENCH)
    core.route("GET", "/", page.index, public=True)
    core.route("GET", "/assets/{name}", page.asset, public=True)


class Page:
    def __init__(self, workbench: Path) -> None:
        dist = workbench / "dist"
        self._index = _index(workbench / "src" / "index.html", dist / "build-info.json")
        self._assets = {path.name: Asset.read(path)
                        for path in sorted((dist / "assets").glob("*")) if path.is_file()}

    async def index(self, request: web.Request, caller: Caller) -> web.Response:
        if self._index is None:
            return web.Response(status=503, text="the workbench page is not built: run "
                                "`make workbench` (needs Node 20 and npm)\n")
        return self._index.response(request, "no-cache")

    async def asset(self, request: web.Request, caller: Caller) -> web.Response:
        name = request.match_info["name"]
        found = self._assets.get(name) if _ASSET_NAME.match(name) else None
        if found is None:
            raise web.HTTPNotFound(text=f"no asset {name!r}\n")
        return found.response(request, IMMUTABLE)


def _index(page: Path, build_info: Path) -> Asset | None:
    """The page, its ``{{app.js}}``-style placeholders filled in with the built files'
    hashed names (``entries`` of the build's record); None when it is not built."""
    if not build_info.exists():
        return None
    html = page.read_text()
    for name, path in json.loads(build_info.read_text())["entries"].items():
        html = html.replace("{{" + name + "}}", path)
    return Asset.of(html.encode(), ".html")
