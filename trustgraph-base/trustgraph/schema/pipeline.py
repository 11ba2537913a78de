"""Records of the ingestion pipeline (docs/ingestion.md has the topology).

Loading is a request/response service answered once the document is durably in
the librarian; everything after runs on persistent stage topics, each record small
(a document is split into chunk records long before the broker's 5 MiB limit).
"""
from typing import Literal

from .knowledge import Term, Triple
from .record import Record, Response

DEFAULT_USER = "trustgraph"
DEFAULT_COLLECTION = "default"


class DocumentRef(Record):
    """Which document, and whose: every stage record carries it, so every store
    write is scoped by user and collection and traceable to its document."""

    id: str
    user: str = DEFAULT_USER
    collection: str = DEFAULT_COLLECTION
    title: str = ""
    # Which storing of the document this record comes from (the librarian counts up
    # on each load): a store can tell a re-load's records from an earlier one's.
    # 0: not known (a record from before versions existed, or not from a document).
    version: int = 0


def chunk_id(document: str, index: int) -> str:
    """A chunk's id: stable across re-loads, so a re-load overwrites, never duplicates."""
    return f"{document}/c{index}"


class TextLoadRequest(Record):
    id: str
    user: str = DEFAULT_USER
    collection: str = DEFAULT_COLLECTION
    title: str = ""
    text: str


class DocumentLoadRequest(Record):
    id: str
    user: str = DEFAULT_USER
    collection: str = DEFAULT_COLLECTION
    title: str = ""
    data: str  # base64
    kind: str = ""  # MIME type; empty: guessed from the content


class LoadResponse(Response):
    """``{}`` on the wire once the document is durably accepted."""

    end_of_stream: bool = True
    wire_hidden = frozenset({"end_of_stream"})  # an error still shows as {"error": ...}


# --- stage records ------------------------------------------------------------------

class DecodeWork(Record):  # stage "decode": the librarian has stored the content
    document: DocumentRef
    kind: str


class Chunk(Record):  # stage "chunks": to chunk embedding and to extraction
    document: DocumentRef
    id: str  # stable: "<document id>/c<index>", so a re-load overwrites, never duplicates
    index: int
    text: str
    page: int | None = None
    # How many chunks this version of the document became: a store can drop the
    # chunks an earlier, longer version left beyond them.
    total: int | None = None
    # Where the chunk is, for citations (absent from older decoders): its last page
    # (PDF), the heading path above it (Markdown headings, PDF outline), its
    # character offsets in the decoded text, and the document's author when known.
    page_end: int | None = None
    headings: list[str] | None = None
    char_start: int | None = None
    char_end: int | None = None
    author: str | None = None


class ChunkVector(Record):  # stage "chunk-vectors": to the vector store's owner
    chunk: Chunk
    vector: list[float]
    model: str = ""  # the embedding model that made the vector ("": not said)


class ChunkTriples(Record):  # stage "triples": to the triples store's owner
    document: DocumentRef
    chunk_id: str
    triples: list[Triple]  # extraction sends one per chunk, empty when it found nothing


class EntityContext(Record):
    entity: Term
    label: str
    definition: str = ""


class ChunkEntities(Record):  # stage "entities": to entity embedding
    document: DocumentRef
    chunk_id: str
    entities: list[EntityContext]


class EntityVector(Record):
    entity: Term
    label: str
    vector: list[float]


class EntityVectors(Record):  # stage "entity-vectors": to the vector store's owner
    document: DocumentRef
    entities: list[EntityVector]
    model: str = ""  # the embedding model that made the vectors ("": not said)
    # On the last record sent for a chunk's entities (possibly with none): once it is
    # stored, that chunk's entity vectors all are (``GraphProgress``). "": not one.
    chunk_id: str = ""


class GraphProgress(Record):  # stage "graph-progress": to the librarian (load-status)
    """A store owner holds a chunk's part of the graph: its triples, or its entity
    vectors. Sent once the write is durable, for chunks of a loaded document
    (version 1 and up); counted once, however often it is sent."""

    document: DocumentRef
    chunk_id: str
    part: Literal["triples", "entities"]


class DocumentRemoved(Record):  # stage "document-removed": every store owner forgets it
    document: DocumentRef
