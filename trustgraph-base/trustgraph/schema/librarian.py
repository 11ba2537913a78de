"""Librarian records: a user's documents, per user and collection (PROTOCOL §2).

The librarian keeps each document's metadata and content. It is outside flows: the
gateway and clients ask it on ``LIBRARIAN_FLOW`` whatever flow they name. Loading
with processing in one step is the flow services ``text-load`` / ``document-load``
(``trustgraph.schema.pipeline``); ``add-processing`` sends a stored document down
a flow's pipeline later.

Operations of ``LibrarianRequest``, and what they read and answer (every answer is
one record with ``end_of_stream: true``, except a streamed listing):

=====================  ==============================================  ==================
operation              request fields (each with user, collection)     answer fields
=====================  ==============================================  ==================
add-document           document_id, content (base64), kind?, title?,   document
                       comments?, tags?
list-documents         streaming? (pages of ``LIST_PAGE`` documents)   documents
list-collections       (the user's only; no collection)                collections
get-document-metadata  document_id                                     document
get-document-content   document_id                                     document, content
remove-document        document_id                                     document (as it was)
add-processing         document_id, flow? (default: the one asked on)  document, processing
begin-upload           document_id, size, kind?, title?, comments?,    upload_id
                       tags?
upload-part            upload_id, part (0, 1, …), content (base64)     (nothing)
complete-upload        upload_id                                       document
=====================  ==============================================  ==================

A document too large for one message (``add-document`` and the loads carry it
whole, and a broker message stays under 5 MiB) is uploaded in parts of at most
``UPLOAD_PART_BYTES``: ``begin-upload`` with its total size, each part (in any
order; sending a part again replaces it), then ``complete-upload``, which stores
it like ``add-document``; ``add-processing`` then sends it down a flow.

An unknown document or upload is the error ``not-found``; bad input is
``bad-request``; a document over the size limit is ``too-large``.
"""
from typing import Literal

from pydantic import AliasChoices, Field

from .pipeline import DEFAULT_COLLECTION, DEFAULT_USER
from .record import Record, Response

# The librarian is outside flows: its service is asked on this flow only.
LIBRARIAN_FLOW = "default"
LIST_PAGE = 500  # documents per record of a streamed listing
UPLOAD_PART_BYTES = 2 * 1024 * 1024  # the part size clients send (base64: 2.7 MiB)

LibrarianOperation = Literal["add-document", "list-documents", "list-collections",
                             "get-document-metadata",
                             "get-document-content", "remove-document", "add-processing",
                             "begin-upload", "upload-part", "complete-upload"]


class DocumentMetadata(Record):
    id: str
    user: str = DEFAULT_USER
    collection: str = DEFAULT_COLLECTION
    title: str = ""
    kind: str = ""  # MIME type
    comments: str = ""
    tags: list[str] = []
    size: int = 0  # bytes of content
    sha256: str = ""  # of the content, hex
    time: int = 0  # when stored, Unix seconds
    version: int = 0  # 1 when first stored, counting up each time it is stored again


class CollectionInfo(Record):
    """One of a user's collections, as the library knows it: those it holds documents in."""

    collection: str
    documents: int = 0


class ProcessingMetadata(Record):
    """A document sent down a flow's pipeline (by a load or by ``add-processing``)."""

    document_id: str
    flow: str
    user: str = DEFAULT_USER
    collection: str = DEFAULT_COLLECTION
    time: int = 0


class LibrarianRequest(Record):
    operation: LibrarianOperation
    document_id: str = Field("", validation_alias=AliasChoices(
        "document_id", "document-id", "id"))
    user: str = DEFAULT_USER
    collection: str = DEFAULT_COLLECTION
    title: str = ""
    kind: str = ""  # MIME type; empty: guessed from the title's extension and the content
    comments: str = ""
    tags: list[str] = []
    content: str = ""  # base64 (add-document)
    flow: str = ""  # add-processing: the flow to process on; empty: the flow asked on
    streaming: bool = False  # list-documents: several records of at most LIST_PAGE
    upload_id: str = ""  # upload-part, complete-upload
    part: int = 0  # upload-part: the part's index, from 0
    size: int = 0  # begin-upload: the document's total size in bytes


class LibrarianResponse(Response):
    document: DocumentMetadata | None = None
    documents: list[DocumentMetadata] | None = None
    collections: list[CollectionInfo] | None = None  # list-collections
    processing: ProcessingMetadata | None = None
    content: str | None = None  # base64 (get-document-content)
    upload_id: str | None = None  # begin-upload
