"""Knowledge cores: a collection's contents, a page at a time (docs/knowledge-cores.md).

A collection lives in three store owners, and each serves its part of a core on the
bus with one service taking ``CoreRequest`` and answering ``CoreResponse``:

==============  ==================  ===========================================
service         processor           parts
==============  ==================  ===========================================
core-documents  librarian           ``documents``: the documents' metadata
core-vectors    vector-store        ``chunks`` (text, citation fields, vector) and
                                    ``entities`` (entity, label, documents, vector)
core-triples    triples-store       ``triples``: each (triple, document, chunk)
==============  ==================  ===========================================

Operations, each with ``user``, ``collection`` and ``part``:

* ``count``: ``count`` records in the collection; ``core-vectors`` also answers the
  ``embedding_model`` its vectors are of and their ``dimension`` (0: none stored).
* ``export``: the page after ``after`` ("" for the first): ``records`` (JSON Lines,
  one row model below per line), ``vectors`` (chunks and entities: base64 of the
  rows' vectors as little-endian float32, row after row, ``dimension`` each) and
  ``next`` (the ``after`` of the next page; absent on the last). A page holds at
  most ``limit`` records and stays well under one broker message.
* ``import``: ``records`` (and ``vectors``) as ``export`` gives them, stored in the
  collection; answers how many were ``stored``. Keyed as the stores key everything,
  so importing a page again writes nothing twice. ``core-vectors`` refuses vectors of
  another ``embedding_model`` than the collection's (``embedding-model-mismatch``):
  an import of no records checks that alone.
"""
import base64
import math
import sys
from array import array
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from .knowledge import Term
from .pipeline import DEFAULT_COLLECTION, DEFAULT_USER
from .record import R, Record, Response

CorePart = Literal["documents", "chunks", "entities", "triples"]
CoreOperation = Literal["count", "export", "import"]
CORE_SERVICES: dict[str, tuple[CorePart, ...]] = {
    "core-documents": ("documents",),
    "core-vectors": ("chunks", "entities"),
    "core-triples": ("triples",),
}
MAX_CORE_PAGE = 5000  # records per page, at most


class CoreRequest(Record):
    operation: CoreOperation
    part: CorePart
    user: str = Field(DEFAULT_USER, min_length=1)
    collection: str = Field(DEFAULT_COLLECTION, min_length=1)
    after: str = ""  # export: "" for the first page, else the last page's ``next``
    limit: int = Field(default=1000, ge=1, le=MAX_CORE_PAGE)  # export: records per page
    records: str = ""  # import: JSON Lines
    vectors: str = ""  # import: base64 of little-endian float32, one row per record
    embedding_model: str = ""  # import of chunks or entities: the core's


class CoreResponse(Response):
    count: int | None = None  # count: records in the collection; export: in this page
    records: str | None = None  # export: JSON Lines
    vectors: str | None = None  # export: base64 float32, ``dimension`` per record
    dimension: int | None = None
    next: str | None = None  # export: the ``after`` of the next page; absent: the last
    embedding_model: str | None = None  # core-vectors: the model of the collection
    stored: int | None = None  # import: records stored
    end_of_stream: bool = True


# The rows: one JSON object per line of a part's pages (and of its file in a core).

class CoreDocument(Record):
    """A document's metadata as the librarian holds it (its content is not carried)."""

    id: str
    title: str = ""
    kind: str = ""
    comments: str = ""
    tags: list[str] = []
    size: int = 0
    sha256: str = ""
    time: int = 0
    version: int = 0


class CoreChunk(Record):
    """A chunk with its text and the citation fields it was stored with; its vector
    is the row of the same number in the page's vectors."""

    chunk_id: str
    document: str
    text: str = ""
    title: str = ""
    version: int = 0  # of the document
    index: int | None = None  # of the chunk in its document
    meta: dict[str, Any] = {}  # order, header_titles, page_range, char_range, author


class CoreEntity(Record):
    """An entity's vector (the row of the same number), label and the documents that
    mention it."""

    entity: Term
    label: str = ""
    documents: list[str] = []


class CoreTriple(Record):
    """One triple as found in one chunk of one document (its provenance): a triple
    found in several chunks is several rows."""

    s: str  # IRI
    p: str  # IRI
    o: str  # IRI, or the literal's text
    o_iri: bool
    document: str
    chunk: str = ""


# The codec of a page: rows as JSON Lines, vectors as base64 float32.

def lines(rows: Sequence[Record]) -> str:
    """Rows as JSON Lines (each line as ``encode`` writes a record)."""
    return "".join(row.model_dump_json(exclude_none=True) + "\n" for row in rows)


def rows_of(model: type[R], text: str) -> list[R]:
    """The rows of JSON Lines text; a bad line raises ``ValueError`` naming it."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(model.model_validate_json(line))
            except ValueError as error:
                raise ValueError(f"line {number}: {error}") from None
    return rows


def pack_vectors(vectors: list[list[float]]) -> tuple[str, int]:
    """Vectors as base64 of little-endian float32, row after row, and their dimension."""
    dimension = len(vectors[0]) if vectors else 0
    if any(len(v) != dimension for v in vectors):
        raise ValueError("vectors of different dimensions in one page")
    values = array("f", (x for v in vectors for x in v))
    if sys.byteorder == "big":
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode("ascii"), dimension


def unpack_vectors(packed: str | bytes, count: int) -> list[list[float]]:
    """``count`` vectors from ``pack_vectors``' text (or its raw bytes)."""
    raw = base64.b64decode(packed, validate=True) if isinstance(packed, str) else packed
    values = array("f")
    values.frombytes(raw)
    if sys.byteorder == "big":
        values.byteswap()
    if not values and count == 0:
        return []
    if count <= 0 or len(values) % count:
        raise ValueError(f"{len(values)} vector values do not make {count} vectors")
    if not math.isfinite(sum(values)):  # NaN and infinities carry through a sum
        raise ValueError("vectors with values that are not finite numbers")
    dimension = len(values) // count
    flat = values.tolist()
    return [flat[n * dimension:(n + 1) * dimension] for n in range(count)]
