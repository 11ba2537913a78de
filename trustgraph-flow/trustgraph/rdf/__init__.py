"""RDF in and out: Turtle / N-Triples to ``Triple`` records and back
(docs/extraction.md)."""
from .convert import FORMATS, RdfError, format_for, parse_rdf, to_turtle

__all__ = ["FORMATS", "RdfError", "format_for", "parse_rdf", "to_turtle"]
