"""A ``graph-edges`` page sent as the JSON the store wrote (``GraphEdgesResponse.page``)
is the record the bus carried when the page was built and encoded as Python values:
the same bytes for a backend that reads Python values (Neo4j), the same record once
decoded for SQLite, which writes the JSON itself."""
import json

import pytest

from trustgraph.schema import RDFS_LABEL, GraphEdgesResponse, Term, Triple, decode, encode
from trustgraph.storage.triples.sqlite import SqliteTriplesStore
from trustgraph.storage.triples.store import EdgePage

ODD = 'Zoë "the second"\tline\n\\ 東京'  # JSON's escapes, and not ASCII
WEIGHTS = {("urn:a", "urn:b"): 2, ("urn:b", "urn:c"): 1}
LABELS = {"urn:a": "Ada", "urn:b": ODD}


def as_values(next: int | None, end_of_stream: bool) -> GraphEdgesResponse:
    """The page as the store built it before: Python values, encoded by pydantic."""
    return GraphEdgesResponse.model_construct(
        edges=[(s, o, w) for (s, o), w in WEIGHTS.items()], labels=LABELS, next=next,
        version=7, end_of_stream=end_of_stream)


@pytest.mark.parametrize("next, end_of_stream", [(5000, False), (5000, True), (None, True)])
def test_a_page_of_python_values_goes_out_as_the_same_bytes(next, end_of_stream):
    page = EdgePage.of(WEIGHTS, LABELS, next)
    sent = GraphEdgesResponse.page(page.edges, page.labels, page.next, 7, end_of_stream)
    assert encode(sent) == encode(as_values(next, end_of_stream))
    assert sent.is_final() is end_of_stream


async def test_a_page_sqlite_wrote_decodes_as_the_same_record(tmp_path):
    store = await SqliteTriplesStore.open(tmp_path / "triples.sqlite")
    try:
        iri = Term.iri
        await store.add("u", "c", [
            Triple(s=iri("urn:a"), p=iri("urn:knows"), o=iri("urn:b")),
            Triple(s=iri("urn:a"), p=iri("urn:likes"), o=iri("urn:b")),
            Triple(s=iri("urn:b"), p=iri("urn:knows"), o=iri("urn:c")),
            Triple(s=iri("urn:a"), p=iri(RDFS_LABEL), o=Term.literal("Ada")),
            Triple(s=iri("urn:b"), p=iri(RDFS_LABEL), o=Term.literal(ODD))], document="d")
        page = await store.edges("u", "c", 0, 5000)
    finally:
        await store.close()
    sent = encode(GraphEdgesResponse.page(page.edges, page.labels, page.next, 7, True))
    received = decode(GraphEdgesResponse, sent)
    expected = decode(GraphEdgesResponse, encode(as_values(None, True)))
    assert sorted(received.edges) == sorted(expected.edges)
    assert received == expected.model_copy(update={"edges": received.edges})
    assert json.loads(sent).keys() == json.loads(encode(as_values(None, True))).keys()
