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

TrustGraph's client is read and answered in its own names too: ``add-document``'s
``document-metadata`` object is read, and a request with ``trustgraph_names`` (what
the gateway's ``POST /api/v1/librarian``, TrustGraph's path, sends) has its listing
also as ``document-metadatas``, as TrustGraph's client reads it.
"""
from typing import Any, Literal, Self

from pydantic import AliasChoices, ConfigDict, Field, model_validator

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


class TrustGraphDocument(Record):
    """A document's metadata as TrustGraph's client sends it with ``add-document``
    (``document-metadata``): what this library keeps of it (not its RDF ``metadata``)."""

    id: str = ""
    title: str = ""
    kind: str = ""
    comments: str = ""
    tags: list[str] = []


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
    # TrustGraph's client names the document here (add-document): read into the fields
    # above that the request leaves empty.
    document_metadata: TrustGraphDocument | None = None
    trustgraph_names: bool = False  # answer a listing in TrustGraph's names too

    @model_validator(mode="after")
    def _trustgraphs_names(self) -> Self:
        named = self.document_metadata
        if named is None:
            return self
        given = {"document_id": named.id, "title": named.title, "kind": named.kind,
                 "comments": named.comments, "tags": named.tags}
        return self.model_copy(update={field: value for field, value in given.items()
                                       if value and not getattr(self, field)})


class TrustGraphListed(Record):
    """A document as TrustGraph's client reads a listing (``document-metadatas``)."""

    id: str
    time: int = 0
    kind: str = ""
    title: str = ""
    comments: str = ""
    metadata: list[dict[str, Any]] = []  # its RDF metadata: none is kept here
    tags: list[str] = []


class LibrarianResponse(Response):
    model_config = ConfigDict(serialize_by_alias=True)  # TrustGraph's hyphenated name
    document: DocumentMetadata | None = None
    documents: list[DocumentMetadata] | None = None
    collections: list[CollectionInfo] | None = None  # list-collections
    processing: ProcessingMetadata | None = None
    content: str | None = None  # base64 (get-document-content)
    upload_id: str | None = None  # begin-upload
    # list-documents asked with ``trustgraph_names``: the listing as TrustGraph reads it
    document_metadatas: list[TrustGraphListed] | None = Field(
        None, serialization_alias="document-metadatas")

