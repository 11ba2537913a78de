"""One naming rule for entities, relations, chunks and documents."""
import pytest

from trustgraph.extract.vocabulary import (
    chunk_id_of,
    chunk_iri,
    document_id_of,
    document_iri,
    entity_iri,
    relation_iri,
    slug,
)


@pytest.mark.parametrize("name, expected", [
    ("Marie Curie", "marie-curie"),
    ("  marie\n\tCURIE ", "marie-curie"),
    ("Marie-Curie!", "marie-curie"),
    ("U.S. Navy", "u-s-navy"),
    ("C++", "c%2B%2B"),
    ("C#", "c%23"),
    ("C", "c"),
    ("Zürich", "zürich"),
    ("Straße", "strasse"),
    ("東京 タワー", "東京-タワー"),
    ("ﬁnance", "finance"),  # NFKC: the ligature is two letters
    ("snake_case name", "snake-case-name"),
    ("?!", ""),
])
def test_slug(name, expected):
    assert slug(name) == expected


def test_names_that_differ_in_case_or_spacing_are_one_entity():
    assert entity_iri("Data  Science") == entity_iri("data science") == \
        "urn:tg:entity:data-science"
    assert entity_iri("C++") != entity_iri("C")
    assert entity_iri("...") is None


def test_relations():
    assert relation_iri("Was born in") == "urn:tg:rel:was-born-in"
    assert relation_iri(" - ") is None


@pytest.mark.parametrize("id", ["doc-1/c0", "reports/2024 wind.txt/c12",
                                "https://example.org/a?b=c#d/c1", "ü 100%/c3", "<>\"{}|^`"])
def test_chunk_and_document_iris_round_trip(id):
    assert chunk_id_of(chunk_iri(id)) == id
    assert document_id_of(document_iri(id)) == id
    for iri in (chunk_iri(id), document_iri(id)):
        assert not any(c in iri for c in ' <>"{}|^`\\#?')


def test_ids_of_other_iris_are_none():
    assert chunk_id_of(document_iri("x")) is None
    assert document_id_of("http://example.org/") is None
