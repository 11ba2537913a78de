"""Knowledge cores over HTTP (docs/knowledge-cores.md): a collection out as a core
file, and a core file into a collection, both streamed a page at a time.

The collection is the caller's user's (``user=`` names another: admins only); an
export needs what reading the stores does, an import what writing them does (the
``core-*`` rows' permissions, core/services.py).

* ``GET /api/v1/collections/{collection}/core?user=&flow=``: the core
  (``application/gzip``), written as the store owners hand out its pages
  (``core-documents``, ``core-vectors``, ``core-triples``). A failure after the
  first bytes ends the file with an ``error.json`` member and without the tar's end,
  so no reader takes it for a whole core.
* ``PUT /api/v1/collections/{collection}/core?user=&flow=``: the body is a core,
  read as it arrives (never held whole); each page goes to its store owner and is
  stored before the next is read. Answered once all is stored: ``{"manifest",
  "stored": {part: records}, "into": {"user", "collection"}}``. Every store keys what
  it writes, so a PUT that was cut off and is made again stores the same collection,
  nothing twice. A core of another embedding model than the collection's (its stamp)
  is refused (409) before anything is stored.
"""
import asyncio
import base64
import json
import logging
import re
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from trustgraph.pubsub.pulsar_shim import MAX_RECORD_BYTES
from trustgraph.schema import CORE_SERVICES, CoreRequest
from trustgraph.schema.core_archive import (
    MANIFEST,
    PARTS,
    VECTOR_PARTS,
    CoreFormatError,
    CoreReader,
    CoreWriter,
    checked_manifest,
    manifest,
    member_name,
    parse_member_name,
)
from trustgraph.schema.cores import CorePart

from ..core import (
    Caller,
    Core,
    Dispatcher,
    Document,
    acts_for,
    bad_request,
    failed,
    permission,
)

log = logging.getLogger(__name__)

CORE_PATH = "/api/v1/collections/{collection}/core"
SERVICE_OF: dict[str, str] = {part: service for service, parts in CORE_SERVICES.items()
                              for part in parts}
# Records asked for per export page: ~1-2 MB each (a chunk is its text and 2 KB of
# vector); a page too big for one message is halved by its store owner.
PAGE_RECORDS = {"documents": 1000, "chunks": 500, "entities": 1000, "triples": 5000}
IMPORT_PAGE_BYTES = MAX_RECORD_BYTES // 2  # of records and vectors in one request
# Import requests of chunks or entities in flight at once: the vector store owner
# writes one page's vectors while the page before goes into its lexical index (and
# the next is read and parsed here). Triples go one page at a time: SQLite has one
# writer anyway, and concurrent MERGEs of the same terms are safe on Neo4j only.
IMPORTS_IN_FLIGHT = 2
READ_BYTES = 256 * 1024  # read from the body at a time



def install(core: Core) -> None:
    cores = Cores(core.client)
    # Refused before a byte is read or written, by the table the pages are asked under.
    core.route("GET", CORE_PATH, cores.export,
               roles=permission(SERVICE_OF["chunks"], "export").roles)
    core.route("PUT", CORE_PATH, cores.put,
               roles=permission(SERVICE_OF["chunks"], "import").roles)
    core.document(DOCUMENT)


@dataclass(frozen=True)
class Scope:
    """Whose collection, asked for by whom, on which flow."""
    caller: Caller
    user: str
    collection: str
    flow: str


def _scope(request: web.Request, caller: Caller, what: str) -> Scope:
    collection = request.match_info["collection"]
    user = acts_for(caller, request.query.get("user"), what)
    if not collection or not user:
        raise bad_request("user and collection must not be empty")
    return Scope(caller, user, collection, request.query.get("flow", "default"))


class Cores:
    def __init__(self, client: Dispatcher) -> None:
        self.client = client

    async def call(self, scope: Scope, request: CoreRequest) -> dict[str, Any]:
        """The one record a core service answers with; its error raised."""
        row = self.client.resolve(SERVICE_OF[request.part], scope.flow)
        return await self.client.final(row, scope.flow, request, caller=scope.caller)

    # -- export ---------------------------------------------------------------------

    async def export(self, request: web.Request, caller: Caller) -> web.StreamResponse:
        scope = _scope(request, caller, "core export")
        user, collection = scope.user, scope.collection
        counts, model, dimension = await self._counts(scope)
        filename = re.sub(r"[^\w.-]", "_", collection)[:100]  # only what a header carries
        response = web.StreamResponse(headers={
            "Content-Type": "application/gzip",
            "Content-Disposition": f'attachment; filename="{filename}.core.tgz"'})
        await response.prepare(request)
        writer = CoreWriter()
        described = manifest(user, collection, model, dimension, counts)
        await response.write(writer.member(MANIFEST, json.dumps(described).encode()))
        try:
            for part in PARTS:
                await self._export_part(response, writer, part, scope)
        except ConnectionError:
            return response  # the client went away: nobody to tell
        except Exception as exception:  # after the headers: said in the file itself
            error = failed(exception)
            log.warning("core export of %s/%s failed: %s: %s", user, collection,
                        error.type, error.message)
            await response.write(writer.member("error.json", json.dumps(
                {"error": error.as_dict()}).encode()))
            return response  # without the tar's end: no reader takes it for a core
        await response.write(writer.end())
        return response

    async def _counts(self, scope: Scope) -> tuple[dict[str, int], str | None, int]:
        answers = await asyncio.gather(*(self.call(scope, CoreRequest(
            operation="count", part=part, user=scope.user, collection=scope.collection))
            for part in PARTS))
        counts: dict[str, int] = {part: answer.get("count", 0)
                                  for part, answer in zip(PARTS, answers, strict=True)}
        vectors = answers[PARTS.index("chunks")]
        return counts, vectors.get("embedding_model"), vectors.get("dimension", 0)

    async def _export_part(self, response: web.StreamResponse, writer: CoreWriter,
                           part: CorePart, scope: Scope) -> None:
        after: str | None = ""
        pages = 0
        while after is not None:
            page = await self.call(scope, CoreRequest(
                operation="export", part=part, user=scope.user, collection=scope.collection,
                after=after, limit=PAGE_RECORDS[part]))
            after = page.get("next")
            if not page.get("count"):
                continue
            pages += 1
            members = [(member_name(part, pages), page["records"].encode())]
            if part in VECTOR_PARTS:
                members.append((member_name(part, pages, vectors=True),
                                base64_bytes(page.get("vectors", ""))))
            for name, data in members:
                await response.write(await asyncio.to_thread(writer.member, name, data))

    # -- import ---------------------------------------------------------------------

    async def put(self, request: web.Request, caller: Caller) -> web.Response:
        reader, importer = CoreReader(), CoreImport(self, _scope(request, caller,
                                                                  "core import"))
        try:
            while data := await request.content.read(READ_BYTES):
                for name, member in reader.feed(data):
                    await importer.member(name, member)
            reader.end()
            await importer.finish()
        except CoreFormatError as error:
            raise bad_request(f"not a knowledge core this gateway reads: {error}") from None
        finally:
            await importer.close()
        return web.json_response({"manifest": importer.manifest, "stored": importer.stored,
                                  "into": {"user": importer.scope.user,
                                           "collection": importer.scope.collection}})


class CoreImport:
    """One core's members into one collection, in the order they come."""

    def __init__(self, cores: Cores, scope: Scope) -> None:
        self._cores = cores
        self.scope = scope
        self.manifest: dict[str, Any] | None = None
        self.stored = dict.fromkeys(PARTS, 0)
        self._waiting: tuple[str, int, bytes] | None = None  # rows awaiting their vectors
        self._storing: set[asyncio.Task] = set()

    async def member(self, name: str, data: bytes) -> None:
        if self.manifest is None:
            if name != MANIFEST:
                raise CoreFormatError(f"its first member is {name!r}, not {MANIFEST}")
            self.manifest = checked_manifest(data)
            await self._check_model()
            return
        if name == "error.json":
            raise CoreFormatError(f"it is the file of an export that failed: "
                                  f"{data.decode(errors='replace')[:500]}")
        page = parse_member_name(name)
        if page is None:
            return  # not ours (a README someone added): nothing to store
        part, number, vectors = page
        if part not in VECTOR_PARTS:
            await self._store(part, data, b"")
        elif not vectors:
            await self._flush_waiting()
            self._waiting = (part, number, data)
        elif self._waiting and self._waiting[:2] == (part, number):
            rows, self._waiting = self._waiting[2], None
            await self._store(part, rows, data)
        else:
            raise CoreFormatError(f"{name}: vectors without the rows before them")

    async def finish(self) -> None:
        await self._flush_waiting()
        while self._storing:
            await self._settle(asyncio.FIRST_EXCEPTION)

    async def close(self) -> None:
        """Abandon what is in flight (the import failed or was cut off)."""
        for task in self._storing:
            task.cancel()
        await asyncio.gather(*self._storing, return_exceptions=True)

    async def _flush_waiting(self) -> None:
        if self._waiting is not None:
            part, number, _ = self._waiting
            raise CoreFormatError(f"{member_name(part, number)} has no vectors "
                                  f"({member_name(part, number, vectors=True)})")

    async def _check_model(self) -> None:
        """Refused before anything is stored: vectors of another model (an import of
        no records checks only that)."""
        assert self.manifest is not None
        if any(self.manifest.get("counts", {}).get(part) for part in VECTOR_PARTS):
            await self._cores.call(self.scope, CoreRequest(
                operation="import", part="chunks", user=self.scope.user,
                collection=self.scope.collection,
                embedding_model=self.manifest.get("embedding_model") or ""))

    async def _store(self, part: CorePart, rows: bytes, vectors: bytes) -> None:
        assert self.manifest is not None
        model = self.manifest.get("embedding_model") or ""
        in_flight = IMPORTS_IN_FLIGHT if part in VECTOR_PARTS else 1
        for records, packed in pages_of(rows, vectors):
            while len(self._storing) >= in_flight:
                await self._settle(asyncio.FIRST_COMPLETED)
            self._storing.add(asyncio.ensure_future(self._store_page(CoreRequest(
                operation="import", part=part, user=self.scope.user,
                collection=self.scope.collection, records=records, vectors=packed,
                embedding_model=model))))

    async def _store_page(self, request: CoreRequest) -> None:
        answer = await self._cores.call(self.scope, request)
        self.stored[request.part] += answer.get("stored", 0)

    async def _settle(self, when: str) -> None:
        """Wait for stores in flight; the first failure is raised."""
        done, self._storing = await asyncio.wait(self._storing, return_when=when)
        for task in done:
            task.result()


def pages_of(rows: bytes, vectors: bytes) -> list[tuple[str, str]]:
    """A member's rows (and their vectors) as requests of at most ``IMPORT_PAGE_BYTES``:
    (JSON Lines, base64 float32)."""
    try:
        text = rows.decode()
    except UnicodeDecodeError as error:
        raise CoreFormatError(f"a page of rows is not UTF-8 text: {error}") from None
    lines = [line for line in text.splitlines(keepends=True) if line.strip()]
    if not lines:
        return []
    if vectors and len(vectors) % (4 * len(lines)):
        raise CoreFormatError(f"{len(vectors)} bytes of vectors for {len(lines)} rows")
    row_bytes = len(vectors) // len(lines)
    pages, start, size = [], 0, 0
    for n, line in enumerate(lines):
        cost = len(line) + row_bytes * 4 // 3
        if n > start and size + cost > IMPORT_PAGE_BYTES:
            pages.append((start, n))
            start, size = n, 0
        size += cost
    pages.append((start, len(lines)))
    return [("".join(lines[a:b]),
             base64_text(vectors[a * row_bytes:b * row_bytes]) if vectors else "")
            for a, b in pages]


def base64_bytes(text: str) -> bytes:
    return base64.b64decode(text) if text else b""


def base64_text(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _paths(refs: object) -> dict[str, Any]:
    parameters = [
        {"name": "collection", "in": "path", "required": True, "schema": {"type": "string"}},
        {"name": "user", "in": "query", "schema": {"type": "string"},
         "description": "whose collection (another user's: admins only); default: "
                        "the caller's"},
        {"name": "flow", "in": "query", "schema": {"type": "string", "default": "default"}}]
    return {CORE_PATH: {
        "get": {"summary": "the collection as a knowledge core (docs/knowledge-cores.md)",
                "parameters": parameters, "responses": {"200": {
                    "description": "the core, streamed", "content": {
                        "application/gzip": {"schema": {"type": "string",
                                                        "format": "binary"}}}}}},
        "put": {"summary": "store a knowledge core in the collection (idempotent)",
                "parameters": parameters,
                "requestBody": {"content": {"application/gzip": {"schema": {
                    "type": "string", "format": "binary"}}}},
                "responses": {"200": {"description": "{manifest, stored: {part: records}}"},
                              "409": {"description": "the core's vectors are of another "
                                                     "embedding model than the "
                                                     "collection's"}}}}}


DOCUMENT = Document((), _paths)
