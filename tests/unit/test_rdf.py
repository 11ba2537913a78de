"""Turtle / N-Triples to Triple records and back: literals survive whatever they
hold, blank nodes get stable IRIs, bad documents are refused clearly."""
import pytest

from trustgraph.rdf import RdfError, format_for, parse_rdf, to_turtle
from trustgraph.rdf.convert import BNODE
from trustgraph.schema import RDFS_LABEL, Term, Triple

EX = "http://example.org/"

TURTLE = b"""\
@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .

ex:curie rdfs:label "Marie Curie" , "Marie Curie"@fr ;
    ex:born "1867-11-07"^^xsd:date ;
    ex:children 2 ;
    ex:address [ ex:city ex:paris ; ex:street "Rue Pierre-et-Marie-Curie" ] ;
    ex:prizes ( ex:physics ex:chemistry ) .
"""

ODD_LITERALS = [
    'She said "hello"',
    'ends with a quote"',
    'three """ quotes """ inside',
    "'single' quotes",
    "line one\nline two\r\nline three",
    "tab\there",
    "back\\slash \\n not a newline",
    "ünïcödé — 東京 — ☃ — 😀",
    "\u0000\u0007 control \u001f",
    " leading and trailing spaces ",
    "",
    "@prefix not: <a directive> .",
    "<http://not.an/iri>",
]


def t(s: str, p: str, o: Term) -> Triple:
    return Triple(s=Term.iri(s), p=Term.iri(p), o=o)


def test_turtle_becomes_triples():
    triples = parse_rdf(TURTLE)
    curie = EX + "curie"
    assert t(curie, RDFS_LABEL, Term.literal("Marie Curie")) in triples
    assert t(curie, EX + "born", Term.literal("1867-11-07")) in triples
    assert t(curie, EX + "children", Term.literal("2")) in triples
    # the language-tagged label has the same text: one triple, not two
    assert sum(x.p.i == RDFS_LABEL for x in triples) == 1
    assert len(triples) == len(set(triples))


def test_blank_nodes_become_skolem_iris_in_document_order():
    triples = parse_rdf(TURTLE)
    address = next(x.o for x in triples if x.p.i == EX + "address")
    assert address.is_iri and address.i.startswith(BNODE)
    assert t(address.i, EX + "city", Term.iri(EX + "paris")) in triples
    blanks = list(dict.fromkeys(term.i for x in triples for term in (x.s, x.o)
                                if term.is_iri and term.i.startswith(BNODE)))
    assert [b.rsplit(":", 1)[1] for b in blanks] == ["0", "1", "2"]  # address, list cells
    assert all(x.s.is_iri and x.p.is_iri for x in triples)


def test_blank_nodes_are_stable_per_document_and_apart_between_documents():
    assert parse_rdf(TURTLE) == parse_rdf(TURTLE)
    assert parse_rdf(TURTLE, scope="doc-1") == parse_rdf(TURTLE, scope="doc-1")
    one = {x.o for x in parse_rdf(TURTLE, scope="doc-1") if x.p.i == EX + "address"}
    two = {x.o for x in parse_rdf(TURTLE, scope="doc-2") if x.p.i == EX + "address"}
    other_bytes = {x.o for x in parse_rdf(TURTLE + b"\n# edited\n")
                   if x.p.i == EX + "address"}
    same_bytes = {x.o for x in parse_rdf(TURTLE) if x.p.i == EX + "address"}
    assert one != two and other_bytes != same_bytes


def test_n_triples():
    data = (f'<{EX}a> <{EX}p> "x\\ny \\"q\\" \\u00e9" .\n'
            f'_:b1 <{EX}p> <{EX}a> .\n'
            f'<{EX}a> <{EX}q> _:b1 .\n'
            f'<{EX}a> <{EX}q> _:b1 .\n')
    triples = parse_rdf(data, "nt")
    assert triples[0] == t(EX + "a", EX + "p", Term.literal('x\ny "q" é'))
    assert triples[1].s == triples[2].o and triples[1].s.i.startswith(BNODE)
    assert len(triples) == 3


def test_relative_iris_resolve_against_a_fixed_base():
    assert parse_rdf(b"<a> <b> <c> .")[0].s.i == "http://trustgraph.invalid/a"
    assert parse_rdf(b"<a> <b> <c> .", base=EX)[0].s.i == EX + "a"


@pytest.mark.parametrize("data, format", [
    (b"ex:a ex:b ex:c .", "turtle"),  # undeclared prefix
    (b"<a> <b> .", "turtle"),
    (b"<http://e/a> <http://e/b> <http://e/c>", "nt"),  # no final dot
    (b"\xff\xfe<bad bytes>", "turtle"),
])
def test_bad_documents_are_refused(data, format):
    with pytest.raises(RdfError, match="not valid"):
        parse_rdf(data, format)


def test_unknown_formats_are_refused():
    with pytest.raises(RdfError, match="unknown RDF format"):
        parse_rdf(b"", "rdfxml")


def test_format_from_file_name():
    assert format_for("graph.ttl") == "turtle"
    assert format_for("dump.NT") == "nt"
    assert format_for("notes") == "turtle"


@pytest.mark.parametrize("text", ODD_LITERALS)
def test_literals_survive_the_round_trip(text):
    triples = [t(EX + "s", RDFS_LABEL, Term.literal(text))]
    assert parse_rdf(to_turtle(triples)) == triples


def test_a_graph_survives_the_round_trip():
    loaded = parse_rdf(TURTLE, scope="doc-1")
    graph = loaded + [
        t("urn:tg:entity:c%2B%2B", "urn:tg:co-occurs", Term.iri("urn:tg:entity:東京")),
        t("urn:tg:entity:東京", "urn:tg:mentioned-in", Term.iri("urn:tg:chunk:doc-1/c0")),
        t("urn:tg:entity:marie-curie", "urn:tg:rel:was-born-in",
          Term.iri("urn:tg:entity:warsaw")),
    ] + [t(EX + f"s{n}", EX + "p", Term.literal(text)) for n, text in enumerate(ODD_LITERALS)]
    turtle = to_turtle(graph)
    assert "@prefix entity: <urn:tg:entity:>" in turtle
    assert set(parse_rdf(turtle)) == set(graph)
    assert set(parse_rdf(turtle.encode("utf-8"))) == set(graph)


def test_iris_that_turtle_cannot_hold_are_percent_encoded():
    turtle = to_turtle([t(EX + "a b", EX + "p", Term.iri(EX + 'x"<y>'))])
    assert parse_rdf(turtle) == [t(EX + "a%20b", EX + "p", Term.iri(EX + "x%22%3Cy%3E"))]


def test_nothing_to_serialise():
    assert parse_rdf(to_turtle([])) == []
