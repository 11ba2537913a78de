"""The query services' records on the wire (PROTOCOL §2): what clients send decodes,
what the services answer encodes to the documented shapes. No broker needed."""
import json

import pytest
from pydantic import ValidationError

from trustgraph.ingest.embedding_stages import entity_text, record_groups
from trustgraph.schema import (
    DocumentEmbeddingsRequest,
    DocumentEmbeddingsResponse,
    EntityVector,
    Error,
    GraphEmbeddingsRequest,
    GraphEmbeddingsResponse,
    ScoredChunk,
    ScoredEntity,
    Term,
    Triple,
    TriplesQueryRequest,
    TriplesQueryResponse,
    decode,
    encode,
)


def test_requests_decode_from_the_protocol_examples():
    triples = decode(TriplesQueryRequest, json.dumps(
        {"s": {"t": "i", "i": "http://ex/a"}, "o": {"t": "l", "v": "x"}, "limit": 5}))
    assert triples.s == Term.iri("http://ex/a") and triples.p is None
    assert triples.o == Term.literal("x") and triples.limit == 5
    assert (triples.user, triples.collection) == ("trustgraph", "default")
    assert decode(TriplesQueryRequest, "{}").limit == 10000

    graph = decode(GraphEmbeddingsRequest, '{"vector": [0.1, 0.2], "user": "u", '
                                           '"collection": "c"}')
    assert (graph.vector, graph.limit, graph.user, graph.collection) == ([0.1, 0.2], 10, "u", "c")
    document = decode(DocumentEmbeddingsRequest, '{"vector": [1], "limit": 3}')
    assert (document.limit, document.user) == (3, "trustgraph")


@pytest.mark.parametrize("bad", [
    '{"vector": []}', '{"limit": 3}', '{"vector": [1], "limit": 0}',
    '{"vector": [1], "limit": 100000}', '{"vector": [1], "user": ""}',
    '{"vector": ["a"]}', '{"vector": [1], "collection": 7}'])
def test_bad_vector_requests_are_refused(bad):
    with pytest.raises(ValidationError):
        decode(DocumentEmbeddingsRequest, bad)


def test_responses_encode_to_the_protocol_shapes():
    triple = Triple(s=Term.iri("http://ex/a"), p=Term.iri("http://ex/p"), o=Term.literal("x"))
    assert json.loads(encode(TriplesQueryResponse(response=[triple]))) == {
        "response": [{"s": {"t": "i", "i": "http://ex/a"}, "p": {"t": "i", "i": "http://ex/p"},
                      "o": {"t": "l", "v": "x"}}], "end_of_stream": True}
    assert json.loads(encode(GraphEmbeddingsResponse(entities=[ScoredEntity(
        entity=Term.iri("http://ex/a"), score=0.5, label="a")]))) == {
        "entities": [{"entity": {"t": "i", "i": "http://ex/a"}, "score": 0.5, "label": "a"}],
        "end_of_stream": True}
    chunk = json.loads(encode(DocumentEmbeddingsResponse(chunks=[ScoredChunk(
        chunk_id="d/c0", text="t", score=0.25, document_id="d", title="T")])))["chunks"][0]
    assert chunk == {"chunk_id": "d/c0", "text": "t", "score": 0.25, "document_id": "d",
                     "title": "T"}
    failure = DocumentEmbeddingsResponse.failure(Error(type="bad-request", message="m"))
    assert json.loads(encode(failure)) == {"error": {"type": "bad-request", "message": "m"},
                                           "end_of_stream": True}


def test_entity_text():
    assert entity_text("Cat ", " a small feline") == "Cat: a small feline"
    assert entity_text("Cat", "") == "Cat"


def test_record_groups_stay_under_the_limit_and_keep_everything():
    vectors = [EntityVector(entity=Term.iri(f"http://ex/{i}"), label=str(i),
                            vector=[0.123456789012345] * 384) for i in range(100)]
    groups = record_groups(vectors, limit=100_000)
    assert [v for g in groups for v in g] == vectors
    assert all(sum(len(encode(v)) for v in g) <= 100_000 for g in groups)
    assert len(groups) > 1
    assert record_groups([]) == []
