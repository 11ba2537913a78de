"""Turtle and N-Triples to ``Triple`` records, and triples back to Turtle.

``Term`` holds IRIs and literals only, so:

* a blank node becomes a skolem IRI, ``urn:tg:bnode:<scope>:<n>``: ``n`` numbers the
  blank nodes in the order the document first uses them, and ``scope`` is a hash of
  the caller's scope (a document id, say) or else of the document's bytes. Loading
  the same document again gives the same IRIs, so nothing is stored twice, and blank
  nodes of different documents never merge.
* a literal keeps its lexical form only: a datatype or language tag is dropped
  (``"42"^^xsd:integer`` and ``"chat"@fr`` load as ``"42"`` and ``"chat"``).
"""
import hashlib
import re
from collections.abc import Iterable
from pathlib import Path

import rdflib
from rdflib.term import BNode, Literal, URIRef

from trustgraph.schema import Term, Triple

BNODE = "urn:tg:bnode:"
# Relative IRIs in a document without @base resolve against this (never the
# working directory, which would make the IRIs differ from machine to machine).
DEFAULT_BASE = "http://trustgraph.invalid/"

FORMATS = {"turtle": "turtle", "ttl": "turtle", "nt": "nt", "ntriples": "nt",
           "n-triples": "nt"}
_SUFFIXES = {".ttl": "turtle", ".turtle": "turtle", ".nt": "nt"}

PREFIXES = {
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
    "skos": "http://www.w3.org/2004/02/skos/core#",
    "xsd": "http://www.w3.org/2001/XMLSchema#",
    "tg": "urn:tg:",
    "entity": "urn:tg:entity:",
    "rel": "urn:tg:rel:",
}

# Characters an IRI may not hold in Turtle or N-Triples (IRIREF).
_NOT_IN_IRI = re.compile(r'[\x00-\x20<>"{}|^`\\]')


class RdfError(ValueError):
    """The document is not valid in the format it was given as."""


def format_for(path: str | Path) -> str:
    """The format of a file, from its suffix (Turtle unless it is ``.nt``)."""
    return _SUFFIXES.get(Path(path).suffix.lower(), "turtle")


class _Collector(rdflib.Graph):
    """A graph that keeps what the parser adds as a list, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.parsed: list[tuple] = []

    def add(self, triple: tuple) -> "_Collector":
        self.parsed.append(triple)
        return self


def parse_rdf(data: bytes | str, format: str = "turtle", *, scope: str | None = None,
              base: str = DEFAULT_BASE) -> list[Triple]:
    """The distinct triples of a Turtle or N-Triples document, in document order."""
    kind = FORMATS.get(format.lower())
    if kind is None:
        raise RdfError(f"unknown RDF format {format!r}; known: {', '.join(FORMATS)}")
    raw = data.encode() if isinstance(data, str) else data
    collector = _Collector()
    try:
        collector.parse(data=raw, format=kind, publicID=base)
    except Exception as error:  # rdflib's parsers raise many types; all mean bad input
        raise RdfError(f"not valid {kind}: {error}") from None
    tag = hashlib.sha256(raw if scope is None else scope.encode()).hexdigest()[:16]
    blanks: dict[BNode, Term] = {}

    def term(node) -> Term:
        if isinstance(node, BNode):
            return blanks.setdefault(node, Term.iri(f"{BNODE}{tag}:{len(blanks)}"))
        if isinstance(node, Literal):
            return Term.literal(str(node))
        return Term.iri(str(node))

    return list(dict.fromkeys(Triple(s=term(s), p=term(p), o=term(o))
                              for s, p, o in collector.parsed))


def to_turtle(triples: Iterable[Triple], prefixes: dict[str, str] | None = None) -> str:
    """Turtle for ``triples``, grouped by subject, with common prefixes bound."""
    graph = rdflib.Graph(bind_namespaces="none")
    for name, namespace in (PREFIXES | (prefixes or {})).items():
        graph.bind(name, namespace)
    for triple in triples:
        graph.add((_node(triple.s), _node(triple.p), _node(triple.o)))
    return graph.serialize(format="turtle")


def _node(term: Term) -> URIRef | Literal:
    if term.is_iri:
        return URIRef(_NOT_IN_IRI.sub(lambda m: f"%{ord(m.group()):02X}", term.value))
    return Literal(term.v)
