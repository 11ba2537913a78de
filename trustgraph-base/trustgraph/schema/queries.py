"""Records of the store query services (PROTOCOL §2): ``triples`` (pattern query),
``graph-embeddings`` (entities nearest a vector) and ``document-embeddings`` (chunks
nearest a vector).

Every request is scoped by ``user`` and ``collection`` (defaults ``trustgraph`` /
``default``); nothing outside that scope is ever returned. Each service answers
once: one record, ``end_of_stream`` true, or an ``error``.
"""

from pydantic import Field, PrivateAttr, field_validator

from .knowledge import Term, Triple
from .pipeline import DEFAULT_COLLECTION, DEFAULT_USER
from .record import Record, Response

MAX_TRIPLES_LIMIT = 100_000
MAX_MATCHES_LIMIT = 1_000


class _Scoped(Record):
    user: str = Field(DEFAULT_USER, min_length=1)
    collection: str = Field(DEFAULT_COLLECTION, min_length=1)


class TriplesQueryRequest(_Scoped):
    """Triples matching the bound positions; none bound: any triple of the scope."""

    s: Term | None = None
    p: Term | None = None
    o: Term | None = None
    limit: int = Field(10000, ge=1, le=MAX_TRIPLES_LIMIT)


class TriplesQueryResponse(Response):
    response: list[Triple] | None = None  # absent only on an error
    end_of_stream: bool = True


class _VectorQuery(_Scoped):
    vector: list[float] = Field(min_length=1)
    limit: int = Field(10, ge=1, le=MAX_MATCHES_LIMIT)
    # The embedding model that made ``vector`` (as the embeddings service names it):
    # a collection embedded with another model refuses the search. None: not checked.
    model: str | None = None

    @field_validator("vector")
    @classmethod
    def _finite(cls, vector: list[float]) -> list[float]:
        if any(x != x or x in (float("inf"), float("-inf")) for x in vector):
            raise ValueError("vector values must be finite numbers")
        return vector


class GraphEmbeddingsRequest(_VectorQuery):
    pass


class ScoredEntity(Record):
    entity: Term
    score: float  # cosine similarity: higher is nearer
    label: str = ""  # not in PROTOCOL §2's minimum; readers may ignore it


class GraphEmbeddingsResponse(Response):
    entities: list[ScoredEntity] | None = None  # best first; absent only on an error
    end_of_stream: bool = True


class DocumentEmbeddingsRequest(_VectorQuery):
    pass


class ScoredChunk(Record):
    chunk_id: str
    text: str
    score: float  # cosine similarity: higher is nearer
    # Beyond PROTOCOL §2's minimum, for RAG sources (PROTOCOL: Source.document_id, title).
    document_id: str = ""
    title: str = ""
    # Citation details, when the chunk was stored with them (see ``Chunk``).
    order: int | None = None  # the chunk's index in its document
    page_range: list[int] | None = None  # [first, last] page (PDF)
    header_titles: list[str] | None = None  # heading path
    char_range: list[int] | None = None  # [start, end) in the decoded text
    author: str | None = None


class DocumentEmbeddingsResponse(Response):
    chunks: list[ScoredChunk] | None = None  # best first; absent only on an error
    end_of_stream: bool = True


class LexicalSearchRequest(_Scoped):
    """Service ``lexical-search``: the chunks whose words best match ``query`` (BM25
    over the chunk text, its document title and heading path), in one scope.
    Answered with a ``DocumentEmbeddingsResponse`` whose scores are BM25 scores
    (higher is better; not comparable with cosine similarities)."""

    query: str = Field(min_length=1, max_length=20_000)
    limit: int = Field(10, ge=1, le=MAX_MATCHES_LIMIT)


class ReembedRequest(_Scoped):
    """Service ``reembed`` (the vector store's owner): every chunk and entity vector of
    the scope computed again by the ``embeddings`` service's current model, in place,
    and the scope stamped with that model (``tg-reembed``). Chunks are embedded as
    the chunk stage embeds them: under their heading path, and their document title
    when ``embed_title``; entities from their label."""

    embed_title: bool = True
    page: int = Field(64, ge=1, le=1000)  # points embedded and written per step


class ReembedResponse(Response):
    """Progress, one record per step (``end_of_stream`` false), then the totals."""

    model: str | None = None  # the model the scope is now embedded with
    previous_model: str | None = None  # what the stamp said before (None: unstamped)
    chunks: int = 0  # chunk vectors computed so far
    entities: int = 0  # entity vectors computed so far
    total: int = 0  # chunk and entity vectors to compute in all
    end_of_stream: bool = True


class SubgraphRequest(_Scoped):
    """Expand from seed entities, one store round trip per hop (GraphRAG's retrieval)."""

    seeds: list[Term] = Field(min_length=1, max_length=MAX_MATCHES_LIMIT)
    max_path_length: int = Field(2, ge=1, le=5)  # hops
    max_entities: int = Field(50, ge=1, le=MAX_MATCHES_LIMIT)  # entities followed
    max_subgraph_size: int = Field(150, ge=1, le=MAX_TRIPLES_LIMIT)  # triples kept
    triple_limit: int = Field(30, ge=1, le=MAX_MATCHES_LIMIT)  # per entity per hop
    # Also seed from the entities of the triples extracted from these chunks (those
    # that best match the question: "mix" retrieval), best first; they take at most
    # half of ``max_entities``.
    seed_chunks: list[str] | None = Field(None, max_length=MAX_MATCHES_LIMIT)

    @field_validator("seeds")
    @classmethod
    def _iris(cls, seeds: list[Term]) -> list[Term]:
        # Only IRIs have edges to follow: say so rather than silently expand nothing.
        if not all(seed.is_iri for seed in seeds):
            raise ValueError('seeds must be IRI terms ({"t": "i", "i": ...}), not literals')
        return seeds


class Evidence(Record):
    """A triple of the subgraph and where it was found (its first provenance)."""

    triple: Triple
    document_id: str = ""
    chunk_id: str = ""


class SubgraphResponse(Response):
    triples: list[Evidence] | None = None  # in the order reached; absent only on error
    labels: dict[str, str] | None = None  # IRI → rdfs:label, for the IRIs that have one
    end_of_stream: bool = True


class GraphVersionRequest(_Scoped):
    """The scope's graph version (service ``graph-version``): a counter the triples
    store bumps on every write and removal that changes the scope's triples, so a
    reader caching something derived from the graph (LazyRAG's communities) knows
    when it is stale. A scope never written to is at version 0."""


class GraphVersionResponse(Response):
    version: int | None = None  # absent only on an error
    end_of_stream: bool = True


MAX_EDGES_PAGE = 10_000


class GraphEdgesRequest(_Scoped):
    """The scope's entity graph (service ``graph-edges``), a page at a time: each
    distinct pair of IRIs joined by at least one triple (literals and self-loops
    left out), with the number of triples joining them. Pages follow ``after``, the
    ``next`` of the page before (0 for the first). With ``streaming``, one request
    brings every page from ``after`` to the last, a record each, the last with
    ``end_of_stream``: a reader can pass the pages on without decoding any of them to
    learn where the next begins (LazyRAG hands them, undecoded, to the process that
    computes its communities)."""

    after: int = Field(0, ge=0)
    limit: int = Field(MAX_EDGES_PAGE, ge=1, le=MAX_EDGES_PAGE)
    streaming: bool = False


# (subject IRI, object IRI, triples joining them): a plain triple, not a record per
# edge, because building and encoding 5,000 records per page held the store's event
# loop for tens of milliseconds (the tuples cost a tenth of that).
GraphEdge = tuple[str, str, int]


class GraphEdgesResponse(Response):
    edges: list[GraphEdge] | None = None  # absent only on an error
    # IRI → rdfs:label; read to the end, the pages label every IRI that has one
    labels: dict[str, str] | None = None
    next: int | None = None  # the cursor of the next page; None: this was the last
    version: int | None = None  # the scope's graph version before the pages were read
    end_of_stream: bool = True
    _json: bytes | None = PrivateAttr(None)  # what ``encoded`` gives, if built already

    @classmethod
    def page(cls, edges: bytes, labels: bytes, next: int | None, version: int,
             end_of_stream: bool) -> "GraphEdgesResponse":
        """A page whose ``edges`` and ``labels`` are JSON already (the triples store
        has SQLite write them): the record's bytes are put together around them, and
        its ``edges`` and ``labels`` fields stay unset, as only the bus reads them."""
        record = cls.model_construct(next=next, version=version,
                                     end_of_stream=end_of_stream)
        tail = b"" if next is None else b',"next":%d' % next
        record._json = (b'{"end_of_stream":%s,"edges":%s,"labels":%s%s,"version":%d}' % (
            b"true" if end_of_stream else b"false", edges, labels, tail, version))
        return record

    def encoded(self) -> bytes:
        return self._json if self._json is not None else super().encoded()
