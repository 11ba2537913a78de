"""RDF for the CLI. The converters (rdflib) live with the processors, in
``trustgraph.rdf``; without that package a command says so in one line."""
from types import ModuleType

from trustgraph.api import TrustGraphError


def rdf() -> ModuleType:
    """``trustgraph.rdf``: ``parse_rdf``, ``to_turtle``, ``format_for``, ``RdfError``."""
    try:
        import trustgraph.rdf as module
    except ImportError as missing:
        raise TrustGraphError("missing-package", f"RDF support needs trustgraph.rdf from "
                              f"trustgraph-flow (pip install trustgraph-flow): {missing}"
                              ) from None
    return module
