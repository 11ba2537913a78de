"""``knowledge-load``: triples a user already has (an RDF graph, parsed client-side)
straight into the triples store of a flow, with entity vectors computed from their
labels.

Request ``{"user", "collection", "source", "triples": [Triple]}``: ``source`` is the
document id the triples are stored under as provenance (a re-load of the same source
writes nothing twice; removing that document id from the stores removes them).
Answer ``{"triples": n, "entities": m}`` once the triples are committed and every
IRI with an ``rdfs:label`` among them has been sent to entity embedding.
"""
from pydantic import Field, field_validator

from .knowledge import Triple
from .pipeline import DEFAULT_COLLECTION, DEFAULT_USER
from .record import Record, Response

# Triples in one request: well under the broker's message size for ordinary literals
# (a triple is ~150 bytes of JSON); clients send larger graphs in batches.
MAX_LOAD_TRIPLES = 10_000
MAX_SOURCE_CHARS = 1024


class KnowledgeLoadRequest(Record):
    user: str = Field(DEFAULT_USER, min_length=1)
    collection: str = Field(DEFAULT_COLLECTION, min_length=1)
    source: str = Field(min_length=1, max_length=MAX_SOURCE_CHARS)
    triples: list[Triple] = Field(max_length=MAX_LOAD_TRIPLES)

    @field_validator("triples")
    @classmethod
    def _storable(cls, triples: list[Triple]) -> list[Triple]:
        for n, triple in enumerate(triples):
            if not (triple.s.is_iri and triple.p.is_iri):
                raise ValueError(f"triple {n}: subject and predicate must be IRIs; "
                                 f"literals only appear as 'o'")
        return triples


class KnowledgeLoadResponse(Response):
    triples: int | None = None  # distinct triples stored from this request
    entities: int | None = None  # labelled entities sent to entity embedding
    end_of_stream: bool = True
