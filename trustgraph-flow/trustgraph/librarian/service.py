"""The librarian processor: a user's documents, and the front door of ingestion.

It serves six request/response services:

* ``librarian`` (outside flows, asked on ``LIBRARIAN_FLOW``): add, list, read and
  remove documents, upload large ones in parts, and send a stored one down a flow's
  pipeline (operations in ``trustgraph.schema.librarian``);
* ``text-load`` and ``document-load`` (per flow): store the document, then send a
  ``DecodeWork`` to the flow's ``decode`` stage, then answer ``{}``;
* ``load-status`` (per flow): how far the pipeline has got with loaded documents
  (status.py);
* ``core-documents``: the documents' metadata a page at a time, out of and into a
  collection, for knowledge cores (core.py);
* ``collection-management`` (outside flows, asked on ``COLLECTIONS_FLOW``): the user's
  collections listed, named and deleted, a delete asking every store owner to
  delete its part (collections.py). Storing a document makes its collection.

Durability: a load is answered only after the content file is fsynced, its metadata
committed, and the ``DecodeWork`` stored by the broker. A crash anywhere before the
answer leaves the client without one, so it sends again; storing again replaces the
document with itself and sends the work again, and every later stage is idempotent
(chunk ids are ``<document id>/c<index>``), so nothing is lost and nothing doubled.

Removing a document first tells every store owner (``DocumentRemoved`` on the
``document-removed`` stage of each flow it was processed on), then deletes it here:
a crash in between leaves it listed, and removing it again finishes the job.
"""
import asyncio
import base64
import binascii
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

from pydantic import Field

from trustgraph.base import (
    BadRequest,
    Context,
    HandledError,
    ProcessorSettings,
    ProcessorSpec,
    Runtime,
    Service,
    Stage,
)
from trustgraph.decoding import MARKDOWN, PDF, PLAIN, guess_kind
from trustgraph.pubsub.pulsar_shim import MAX_RECORD_BYTES
from trustgraph.schema import (
    LIBRARIAN_FLOW,
    DecodeWork,
    DocumentLoadRequest,
    DocumentMetadata,
    DocumentRef,
    DocumentRemoved,
    GraphProgress,
    LibrarianRequest,
    LibrarianResponse,
    LoadResponse,
    LoadStatusRequest,
    LoadStatusResponse,
    Record,
    TextLoadRequest,
)
from trustgraph.schema.lazy_rag import LazyRagSwitch
from trustgraph.schema.librarian import LIST_PAGE, LibrarianOperation, TrustGraphListed
from trustgraph.schema.operations import per_operation

from .collection_store import CollectionStore
from .collections import Collections, collections_service, running_owners
from .core import core_documents_service
from .graph_progress import GraphProgressStore, progress_stage
from .status import status_handler
from .store import LibraryStore

log = logging.getLogger(__name__)

NAME = "librarian"
MAX_ID_CHARS = 1024
DEFAULT_MAX_DOCUMENT_BYTES = 3 * 1024 * 1024
DEFAULT_MAX_UPLOAD_BYTES = 256 * 1024 * 1024

_KIND_ALIASES = {"text/x-markdown": MARKDOWN, "application/x-pdf": PDF}
_REFUSED_TEXT = ("text/html", "text/rtf")  # the decoder refuses these too

Emit = Callable[[str, str, Record], Awaitable[None]]  # (flow, stage, record)
# What an operation of the librarian service gives: its one record, or a stream of them.
Answer = Awaitable[LibrarianResponse] | AsyncIterator[LibrarianResponse]


class LibrarianSettings(ProcessorSettings, LazyRagSwitch):  # LazyRAG's: ask it to delete
    tg_max_document_bytes: int = Field(DEFAULT_MAX_DOCUMENT_BYTES, gt=0, description=(
        "largest document (bytes) accepted in one request, and largest upload part; one "
        "request must fit in one broker message, so past ~3.7 MiB requests fail on the "
        "bus whatever this says"))
    tg_max_upload_bytes: int = Field(DEFAULT_MAX_UPLOAD_BYTES, gt=0, description=(
        "largest document (bytes) accepted when uploaded in parts"))


def normal_kind(kind: str) -> str:
    """The MIME type the decoder will dispatch on, or a bad-request error now
    rather than a rejection later in the pipeline."""
    base = kind.split(";")[0].strip().lower()
    base = _KIND_ALIASES.get(base, base)
    if base in (PDF, MARKDOWN) or (base.startswith("text/") and base not in _REFUSED_TEXT):
        return kind.strip()
    raise BadRequest(f"cannot process documents of type {kind!r}; supported: {PLAIN} "
                      f"(and other text/*), {MARKDOWN}, {PDF}")


def is_pdf(kind: str) -> bool:
    base = kind.split(";")[0].strip().lower()
    return _KIND_ALIASES.get(base, base) == PDF


class Library:
    """The operations behind the three services; ``emit`` sends to a stage of a flow."""

    def __init__(self, store: LibraryStore, emit: Emit,
                 max_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
                 max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES) -> None:
        self.store = store
        self.progress = GraphProgressStore(store.root)  # each document's graph, per chunk
        self.emit = emit
        self.max_bytes = max_bytes
        self.max_upload_bytes = max_upload_bytes

    # --- checks ------------------------------------------------------------------

    def check_key(self, id: str, user: str, collection: str, field: str = "id") -> None:
        if not id:
            raise BadRequest(f"{field} is required")
        if len(id) > MAX_ID_CHARS:
            raise BadRequest(f"{field} is {len(id)} characters long, over {MAX_ID_CHARS}")
        if not user or not collection:
            raise BadRequest("user and collection must not be empty")

    def check_size(self, name: str, size: int) -> None:
        if size > self.max_bytes:
            raise HandledError("too-large", (
                f"{name} is {size} bytes, over the limit of {self.max_bytes} bytes for one "
                "request (TG_MAX_DOCUMENT_BYTES); upload larger documents in parts "
                "(begin-upload)"))

    def content_of(self, name: str, encoded: str, field: str) -> bytes:
        # Checked before decoding a huge string: the decoded size of valid base64.
        self.check_size(name, len(encoded.rstrip("=")) * 3 // 4)
        try:
            content = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as error:
            raise BadRequest(f"{field} is not valid base64: {error}") from None
        if not content:
            raise BadRequest(f"{field} is empty")
        self.check_size(name, len(content))
        return content

    def kind_of(self, kind: str, content: bytes, title: str) -> str:
        kind = normal_kind(kind or guess_kind(content, title))
        if is_pdf(kind) and b"%PDF-" not in content[:1024]:
            raise BadRequest("the content is not a PDF (no %PDF- header)")
        return kind

    # --- operations --------------------------------------------------------------

    async def save(self, document: DocumentMetadata, content: bytes,
                   flow: str | None) -> DocumentMetadata:
        """Durably stored (and, with ``flow``, sent down that flow) when it returns."""
        stored = await asyncio.to_thread(self.store.put, document, content, flow)
        if flow is not None:
            await self.process(stored, flow)
        return stored

    async def process(self, document: DocumentMetadata, flow: str) -> None:
        await self.emit(flow, "decode", DecodeWork(document=ref(document), kind=document.kind))

    async def text_load(self, request: TextLoadRequest, ctx: Context) -> LoadResponse:
        self.check_key(request.id, request.user, request.collection)
        content = request.text.encode("utf-8", errors="replace")
        if not content:
            raise BadRequest("text is empty")
        self.check_size(f"document {request.id!r}", len(content))
        # Plain text, unless it reads as Markdown (by its title's extension or its
        # headings): then its markup is dropped before chunking.
        kind = MARKDOWN if guess_kind(content, request.title) == MARKDOWN else PLAIN
        await self._load(request, content, kind, ctx)
        return LoadResponse()

    async def document_load(self, request: DocumentLoadRequest, ctx: Context
                            ) -> LoadResponse:
        self.check_key(request.id, request.user, request.collection)
        content = self.content_of(f"document {request.id!r}", request.data, "data")
        await self._load(request, content, self.kind_of(request.kind, content, request.title),
                         ctx)
        return LoadResponse()

    async def _load(self, request: TextLoadRequest | DocumentLoadRequest, content: bytes,
                    kind: str, ctx: Context) -> None:
        document = DocumentMetadata(id=request.id, user=request.user,
                                    collection=request.collection, title=request.title,
                                    kind=kind)
        await self.save(document, content, ctx.flow)
        log.info("id=%s stored %r of %s/%s (%s, %d bytes); sent to decode:%s", ctx.id,
                 request.id, request.user, request.collection, kind, len(content), ctx.flow)

    # --- the librarian service: its operations, one method each (OPERATIONS) ------------

    def librarian(self, request: LibrarianRequest, ctx: Context) -> Answer:
        return OPERATIONS[request.operation](self, request, ctx)

    def document_key(self, request: LibrarianRequest) -> tuple[str, str, str]:
        """The (user, collection, document id) an operation on one document names,
        checked."""
        self.check_key(request.document_id, request.user, request.collection, "document_id")
        return request.user, request.collection, request.document_id

    async def add_document(self, request: LibrarianRequest, ctx: Context
                           ) -> LibrarianResponse:
        user, collection, id = self.document_key(request)
        content = self.content_of(f"document {id!r}", request.content, "content")
        document = DocumentMetadata(
            id=id, user=user, collection=collection, title=request.title,
            kind=self.kind_of(request.kind, content, request.title),
            comments=request.comments, tags=request.tags)
        stored = await self.save(document, content, None)
        log.info("id=%s added %r to %s/%s (%s, %d bytes)", ctx.id, id, user, collection,
                 stored.kind, stored.size)
        return LibrarianResponse(document=stored, end_of_stream=True)

    async def list_documents(self, request: LibrarianRequest, ctx: Context
                             ) -> AsyncIterator[LibrarianResponse]:
        """One record, or (``streaming``) pages of at most ``LIST_PAGE`` documents."""
        user, collection = request.user, request.collection
        if not user or not collection:
            raise BadRequest("user and collection must not be empty")
        if not request.streaming:
            documents = await asyncio.to_thread(self.store.documents, user, collection)
            yield LibrarianResponse(documents=documents, end_of_stream=True,
                                    document_metadatas=trustgraph_listing(documents)
                                    if request.trustgraph_names else None)
            return
        after = ""
        while True:
            page = await asyncio.to_thread(self.store.documents, user, collection, after,
                                           LIST_PAGE + 1)
            last = len(page) <= LIST_PAGE
            page = page[:LIST_PAGE]
            yield LibrarianResponse(documents=page, end_of_stream=last)
            if last:
                return
            after = page[-1].id

    async def list_collections(self, request: LibrarianRequest, ctx: Context
                               ) -> LibrarianResponse:
        if not request.user:
            raise BadRequest("user must not be empty")
        return LibrarianResponse(end_of_stream=True, collections=await asyncio.to_thread(
            self.store.collections, request.user))

    async def get_document_metadata(self, request: LibrarianRequest, ctx: Context
                                    ) -> LibrarianResponse:
        document = await asyncio.to_thread(self.store.get, *self.document_key(request))
        return LibrarianResponse(document=document, end_of_stream=True)

    async def get_document_content(self, request: LibrarianRequest, ctx: Context
                                   ) -> LibrarianResponse:
        document, content = await asyncio.to_thread(self.store.read,
                                                    *self.document_key(request))
        # base64 (4/3 of its size) plus a little JSON must fit one message
        if len(content) // 3 * 4 + 4096 > MAX_RECORD_BYTES:
            raise HandledError("too-large", f"document {document.id!r} ({len(content)} "
                               "bytes) is too large for one message")
        return LibrarianResponse(document=document, end_of_stream=True,
                                 content=base64.b64encode(content).decode("ascii"))

    async def remove_document(self, request: LibrarianRequest, ctx: Context
                              ) -> LibrarianResponse:
        """The store owners forget it first (see the module's doc), then the library."""
        user, collection, id = self.document_key(request)
        document = await asyncio.to_thread(self.store.get, user, collection, id)
        processing = await asyncio.to_thread(self.store.processing, user, collection, id)
        flows = sorted({p.flow for p in processing} | {ctx.flow})
        for flow in flows:
            await self.emit(flow, "document-removed", DocumentRemoved(document=ref(document)))
        removed = await asyncio.to_thread(self.store.remove, user, collection, id)
        await asyncio.to_thread(self.progress.forget, user, collection, id)
        log.info("id=%s removed %r of %s/%s; document-removed sent on %s", ctx.id, id,
                 user, collection, ",".join(flows))
        return LibrarianResponse(document=removed, end_of_stream=True)

    async def add_processing(self, request: LibrarianRequest, ctx: Context
                             ) -> LibrarianResponse:
        user, collection, id = self.document_key(request)
        flow = request.flow or ctx.flow
        document, processing = await asyncio.to_thread(
            self.store.add_processing, user, collection, id, flow)
        await self.process(document, flow)
        log.info("id=%s sent %r of %s/%s to decode:%s", ctx.id, id, user, collection, flow)
        return LibrarianResponse(document=document, processing=processing,
                                 end_of_stream=True)

    async def begin_upload(self, request: LibrarianRequest, ctx: Context
                           ) -> LibrarianResponse:
        user, collection, id = self.document_key(request)
        if request.size <= 0:
            raise BadRequest("size (the document's total bytes) must be positive")
        if request.size > self.max_upload_bytes:
            raise HandledError("too-large", (
                f"document {id!r} is {request.size} bytes, over the limit of "
                f"{self.max_upload_bytes} bytes (TG_MAX_UPLOAD_BYTES)"))
        document = DocumentMetadata(
            id=id, user=user, collection=collection, title=request.title,
            kind=normal_kind(request.kind) if request.kind else "",
            comments=request.comments, tags=request.tags)
        upload_id = await asyncio.to_thread(self.store.begin_upload, document, request.size)
        log.info("id=%s upload %s of %r to %s/%s begun (%d bytes)", ctx.id, upload_id, id,
                 user, collection, request.size)
        return LibrarianResponse(upload_id=upload_id, end_of_stream=True)

    async def upload_part(self, request: LibrarianRequest, ctx: Context
                          ) -> LibrarianResponse:
        content = self.content_of(f"part {request.part}", request.content, "content")
        await asyncio.to_thread(self.store.upload_part, request.user, request.collection,
                                upload_id(request), request.part, content)
        return LibrarianResponse(end_of_stream=True)

    async def complete_upload(self, request: LibrarianRequest, ctx: Context
                              ) -> LibrarianResponse:
        user, collection, upload = request.user, request.collection, upload_id(request)
        document, _ = await asyncio.to_thread(self.store.upload, user, collection, upload)
        head = await asyncio.to_thread(self.store.upload_head, user, collection, upload)
        # With no part 0, completing fails below, naming the missing part.
        kind = self.kind_of(document.kind, head, document.title) if head else document.kind
        stored = await asyncio.to_thread(self.store.complete_upload, user, collection,
                                         upload, kind)
        log.info("id=%s upload %s complete: %r in %s/%s (%s, %d bytes)", ctx.id, upload,
                 stored.id, user, collection, stored.kind, stored.size)
        return LibrarianResponse(document=stored, end_of_stream=True)


# Each operation LibrarianRequest declares, and the method that does it.
OPERATIONS: Mapping[LibrarianOperation, Callable[[Library, LibrarianRequest, Context], Answer]] \
    = per_operation(LibrarianRequest, {
        "add-document": Library.add_document,
        "list-documents": Library.list_documents,
        "list-collections": Library.list_collections,
        "get-document-metadata": Library.get_document_metadata,
        "get-document-content": Library.get_document_content,
        "remove-document": Library.remove_document,
        "add-processing": Library.add_processing,
        "begin-upload": Library.begin_upload,
        "upload-part": Library.upload_part,
        "complete-upload": Library.complete_upload,
    }, "the librarian's operations")


def trustgraph_listing(documents: list[DocumentMetadata]) -> list[TrustGraphListed]:
    return [TrustGraphListed(id=d.id, time=d.time, kind=d.kind, title=d.title,
                             comments=d.comments, tags=d.tags) for d in documents]


def upload_id(request: LibrarianRequest) -> str:
    if not request.upload_id:
        raise BadRequest("upload_id is required")
    return request.upload_id


def ref(document: DocumentMetadata) -> DocumentRef:
    return DocumentRef(id=document.id, user=document.user, collection=document.collection,
                       title=document.title)


def library_services(library: Library, collections: Collections) -> list[Service | Stage]:
    return [
        Service(NAME, LibrarianRequest, LibrarianResponse, library.librarian,
                global_flow=LIBRARIAN_FLOW),
        Service("text-load", TextLoadRequest, LoadResponse, library.text_load,
                error_type="load-error"),
        Service("document-load", DocumentLoadRequest, LoadResponse, library.document_load,
                error_type="load-error"),
        Service("load-status", LoadStatusRequest, LoadStatusResponse,
                status_handler(library.store, library.progress),
                error_type="load-status-error"),
        Stage("graph-progress", GraphProgress, progress_stage(library.progress, library.store),
              subscription=NAME),
        core_documents_service(library.store),
        collections_service(collections),
    ]


async def librarian_services(runtime: Runtime) -> list[Service | Stage]:
    settings = runtime.settings
    store = await asyncio.to_thread(LibraryStore, settings.tg_data_dir)
    if removed := await asyncio.to_thread(store.remove_stale_temporaries):
        log.info("removed %d partial content files left by a crash", removed)
    if removed := await asyncio.to_thread(store.remove_stale_uploads):
        log.info("removed %d uploads abandoned before completion", removed)
    log.info("library at %s", store.root)
    library = Library(store, runtime.emit, settings.tg_max_document_bytes,
                      settings.tg_max_upload_bytes)
    return library_services(library, Collections(
        CollectionStore(store), running_owners(settings.lazy_rag_enabled), library.progress))


SPEC = ProcessorSpec(NAME, LibrarianSettings, librarian_services)
