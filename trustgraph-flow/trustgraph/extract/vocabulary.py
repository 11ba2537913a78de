"""The IRIs extraction writes (docs/extraction.md describes the graph they form).

Names become IRIs by one rule, so the keyphrase extractor, the LLM extractor and
retrieval agree: the same name always gives the same IRI, on every machine.

    entity_iri("Marie Curie")   -> urn:tg:entity:marie-curie
    entity_iri("C++")           -> urn:tg:entity:c%2B%2B
    relation_iri("was born in") -> urn:tg:rel:was-born-in
    chunk_iri("doc-1/c3")       -> urn:tg:chunk:doc-1/c3
"""
import re
import unicodedata
from urllib.parse import quote, unquote

from trustgraph.schema import RDFS_LABEL

ENTITY = "urn:tg:entity:"
RELATION = "urn:tg:rel:"
CHUNK = "urn:tg:chunk:"
DOCUMENT = "urn:tg:doc:"

LABEL = RDFS_LABEL
DEFINITION = "http://www.w3.org/2004/02/skos/core#definition"
CO_OCCURS = "urn:tg:co-occurs"  # entity → entity, subject IRI < object IRI
MENTIONED_IN = "urn:tg:mentioned-in"  # entity → chunk
IN_DOCUMENT = "urn:tg:in-document"  # chunk → document

# The predicates of triples that say nothing a reader would call a fact: labels (every
# name in a statement is its label already) and the provenance edges (an entity
# mentioned in a chunk, a chunk in its document), which say where a statement came
# from. Retrieval cites those by document title and heading, never as statements.
NOT_STATEMENTS = frozenset({LABEL, MENTIONED_IN, IN_DOCUMENT})

# The labels of the fixed predicates, emitted with them so a graph explains itself.
PREDICATE_LABELS = {
    CO_OCCURS: "co-occurs with",
    MENTIONED_IN: "mentioned in",
    IN_DOCUMENT: "in document",
    DEFINITION: "definition",
}

# A chunk's rdfs:label is its heading path (Markdown headings, a PDF's outline),
# joined by this: retrieval cites a triple by its document's title and this path.
HEADING_SEPARATOR = " > "

# Words are runs of letters and digits; "+" and "#" stay attached (C++, C#, F#) and
# are percent-encoded, being reserved in IRIs.
_WORD = re.compile(r"[^\W_]+[+#]*")
_RESERVED = str.maketrans({"+": "%2B", "#": "%23"})
# Ids (chunk, document) keep these characters; anything else is percent-encoded.
_ID_SAFE = "/:@!$&'()*,;=~"


def slug(name: str) -> str:
    """``name`` folded for matching: NFKC, case-folded, words joined by ``-``; punctuation
    and spacing are dropped. Empty when ``name`` has no letters or digits."""
    folded = unicodedata.normalize("NFKC", name).casefold()
    return "-".join(_WORD.findall(folded)).translate(_RESERVED)


# Plural-looking words that are singular already.
NOT_PLURAL = {"species", "series", "means", "news", "physics", "mathematics", "economics",
              "politics", "athletics", "ethics", "genetics", "linguistics", "analysis",
              "basis", "crisis", "thesis", "status", "virus", "bus", "gas", "atlas"}


def singular(word: str) -> str:
    """A plural English word's singular by spelling alone ("parrots" → "parrot",
    "colonies" → "colony"); any other word as it is. For matching names, where a
    wrong guess costs only a probe that finds nothing."""
    lower = word.casefold()
    if lower in NOT_PLURAL or len(word) < 4 or not word[-1:].lower() == "s":
        return word
    if lower.endswith("ies"):
        return word[:-3] + "y"
    if lower.endswith(("sses", "xes", "ches", "shes", "zes")):
        return word[:-2]
    return word if lower.endswith(("ss", "us", "is")) else word[:-1]


def entity_iri(name: str) -> str | None:
    """The entity ``name`` stands for, or None for a name with no letters or digits."""
    key = slug(name)
    return ENTITY + key if key else None


def relation_iri(phrase: str) -> str | None:
    key = slug(phrase)
    return RELATION + key if key else None


def chunk_iri(chunk_id: str) -> str:
    return CHUNK + quote(chunk_id, safe=_ID_SAFE)


def document_iri(document_id: str) -> str:
    return DOCUMENT + quote(document_id, safe=_ID_SAFE)


def chunk_id_of(iri: str) -> str | None:
    """The chunk id of a chunk IRI (None for any other IRI)."""
    return unquote(iri.removeprefix(CHUNK)) if iri.startswith(CHUNK) else None


def document_id_of(iri: str) -> str | None:
    return unquote(iri.removeprefix(DOCUMENT)) if iri.startswith(DOCUMENT) else None
