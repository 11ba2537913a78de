"""The workbench page: its committed build matches its sources, references nothing
but its own files, and the gateway serves it with the right headers.

The build (``make workbench``: ``npm ci`` + ``node build.mjs``) writes
``dist/build-info.json`` with a hash of every file it read; recomputing that hash
here tells, without Node, whether someone changed ``src/`` (or the lock file)
without rebuilding.
"""
import hashlib
import json
import re
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tests.support.page import add_page_routes
from trustgraph.gateway.apis.page import DIST

WORKBENCH = DIST.parent
INPUTS = ["build.mjs", "package.json", "package-lock.json", "src"]  # as build.mjs


def source_hash() -> str:
    """build.mjs's hash: sorted relative paths, each as ``path\\0content\\0``."""
    paths = []
    for name in INPUTS:
        path = WORKBENCH / name
        paths += [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
    digest = hashlib.sha256()
    for relative in sorted(p.relative_to(WORKBENCH).as_posix() for p in paths):
        digest.update(relative.encode() + b"\0" + (WORKBENCH / relative).read_bytes() + b"\0")
    return digest.hexdigest()


def build_info() -> dict:
    return json.loads((DIST / "build-info.json").read_text())


def test_the_committed_build_was_made_from_the_committed_sources():
    assert build_info()["source_sha256"] == source_hash(), (
        "workbench/dist is stale: run `make workbench` and commit dist/")


def test_dist_holds_exactly_the_built_files():
    on_disk = {p.relative_to(DIST).as_posix() for p in DIST.rglob("*") if p.is_file()}
    assert on_disk == set(build_info()["files"]) | {"build-info.json"}


def test_dist_holds_no_copy_of_the_page():
    # The page is src/index.html, its asset names filled in when served.
    assert "index.html" not in build_info()["files"]
    assert set(build_info()["entries"]) == {"app.js", "style.css"}


async def test_the_page_loads_only_its_own_assets(client):
    html = await (await client.get("/")).text()
    assert "{{" not in html  # every placeholder filled in
    references = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert references and all(r.startswith("/assets/") or r == "data:," for r in references)
    for reference in references:
        if reference.startswith("/assets/"):
            assert (DIST / reference.lstrip("/")).is_file(), reference
    for path in (DIST / "assets").glob("*"):
        if path.suffix in (".js", ".css"):
            text = path.read_text()
            # No module, stylesheet or font from anywhere but the gateway.
            assert not re.search(r"""import\s*\(?\s*["'](?:https?:)?//""", text), path.name
            assert not re.search(r"""url\(\s*["']?(?:https?:)?//""", text), path.name


# --- serving ----------------------------------------------------------------------------

@pytest.fixture
async def client():
    app = web.Application()
    add_page_routes(app)
    async with TestClient(TestServer(app)) as client:
        yield client


async def test_the_page_is_revalidated_and_locked_down(client):
    response = await client.get("/")
    assert response.status == 200
    assert response.content_type == "text/html"
    assert response.headers["Cache-Control"] == "no-cache"
    csp = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "connect-src 'self'" in csp
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    again = await client.get("/", headers={"If-None-Match": response.headers["ETag"]})
    assert again.status == 304


async def test_assets_are_cached_for_good_and_compressed(client):
    html = await (await client.get("/")).text()
    script = re.search(r'src="(/assets/app-[^"]+\.js)"', html).group(1)
    response = await client.get(script, headers={"Accept-Encoding": "gzip"})
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/javascript")
    assert response.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert response.headers["Content-Encoding"] == "gzip"
    assert await response.read() == (DIST / script.lstrip("/")).read_bytes()


@pytest.mark.parametrize("path", ["/assets/nope.js", "/assets/..%2Fbuild-info.json"])
async def test_unknown_assets_are_not_found(client, path):
    assert (await client.get(path)).status == 404


async def test_an_unbuilt_page_says_how_to_build_it(tmp_path: Path):
    app = web.Application()
    add_page_routes(app, tmp_path)
    async with TestClient(TestServer(app)) as client:
        response = await client.get("/")
        assert response.status == 503
        assert "make workbench" in await response.text()
