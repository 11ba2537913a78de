"""``load-status``: how far a flow's pipeline has got with loaded documents, so a
loader can wait for them and count their chunks (the load itself answers ``{}`` as
soon as the librarian holds the document, before it is decoded).

Request ``{"user", "collection", "documents": [id, ...]}``; answer
``{"documents": [DocumentStatus, ...]}``, one per id asked, in that order:

==========  ===========================================================================
state       meaning
==========  ===========================================================================
unknown     not in the library, or never sent down this flow
decoding    loaded; not yet cut into chunks
embedding   cut into ``chunks`` chunks, of which ``stored`` have their vector stored
done        every chunk's vector is stored: the document is searchable
failed      the decoder could not read it; ``error`` says why
==========  ===========================================================================

``version`` is the storing of the document the counts are about (each load counts
it up), and ``stored`` counts only that version's chunk vectors, so a re-load is
not "done" before its own chunks are stored.

The graph (triples, entity vectors) settles beside chunk embedding, usually later.
Asked with ``"graph": true``, a decoded document's status also has ``triples`` and
``entities``, the chunks of this version whose triples, and whose entity vectors,
the stores hold, and ``graph``: ``extracting`` until both reach ``chunks``, then
``done`` (graph questions then find the document).

The librarian answers it from the decoder's record of each document's chunks, the
store owners' reports of each chunk's graph (stage ``graph-progress``), and asks
the vector store's owner how many chunk vectors are stored (``chunk-count``, a
service of the bus only).
"""
from typing import Literal

from pydantic import Field

from .pipeline import DEFAULT_COLLECTION, DEFAULT_USER
from .record import Record, Response

MAX_STATUS_DOCUMENTS = 1000  # ids in one request

LoadState = Literal["unknown", "decoding", "embedding", "done", "failed"]
GraphState = Literal["extracting", "done"]


class LoadStatusRequest(Record):
    user: str = Field(DEFAULT_USER, min_length=1)
    collection: str = Field(DEFAULT_COLLECTION, min_length=1)
    documents: list[str] = Field(max_length=MAX_STATUS_DOCUMENTS)
    graph: bool = False  # report the graph's progress too


class DocumentStatus(Record):
    id: str
    state: LoadState
    version: int = 0
    chunks: int | None = None  # known once decoded
    stored: int = 0  # chunk vectors of this version stored
    error: str | None = None  # why it failed
    # Asked for (``graph``), once decoded: chunks of this version whose triples /
    # entity vectors are stored, and whether all of them are.
    triples: int | None = None
    entities: int | None = None
    graph: GraphState | None = None


class LoadStatusResponse(Response):
    documents: list[DocumentStatus] | None = None  # absent only on an error
    end_of_stream: bool = True


class ChunkSet(Record):
    """One version of a document's chunks, as ``chunk-count`` counts them; with
    ``index``, only that chunk of it (1 when its vector is stored, else 0): what a
    redelivered chunk asks before it is embedded again."""

    id: str
    version: int
    index: int | None = None


class ChunkCountRequest(Record):
    user: str = Field(DEFAULT_USER, min_length=1)
    collection: str = Field(DEFAULT_COLLECTION, min_length=1)
    documents: list[ChunkSet] = Field(max_length=MAX_STATUS_DOCUMENTS)


class ChunkCountResponse(Response):
    stored: list[int] | None = None  # per document asked, in order
    end_of_stream: bool = True
