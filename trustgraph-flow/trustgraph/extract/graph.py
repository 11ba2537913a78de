"""What one chunk adds to the knowledge graph, built up by an extractor and sent on
as one ``ChunkTriples`` and one ``ChunkEntities`` record.

Every entity gets its label and a ``mentioned-in`` edge to the chunk, and the chunk an
``in-document`` edge to its document (and its heading path as its label), so
retrieval can go from any entity to the passages and documents it came from, and
cite them by title and heading.
"""
import re
from dataclasses import dataclass, field

from trustgraph.schema import Chunk, ChunkEntities, ChunkTriples, EntityContext, Term, Triple

from .vocabulary import (
    DEFINITION,
    HEADING_SEPARATOR,
    IN_DOCUMENT,
    LABEL,
    MENTIONED_IN,
    PREDICATE_LABELS,
    chunk_iri,
    document_iri,
    entity_iri,
)

_SPACE = re.compile(r"\s+")


def tidy(text: str) -> str:
    """``text`` on one line, runs of white space as one space."""
    return _SPACE.sub(" ", text).strip()


@dataclass
class ChunkGraph:
    chunk: Chunk
    triples: dict[Triple, None] = field(default_factory=dict)  # an ordered set
    entities: dict[Term, EntityContext] = field(default_factory=dict)  # to embed
    named: set[Term] = field(default_factory=set)  # every entity of the chunk

    def __post_init__(self) -> None:
        self.node = Term.iri(chunk_iri(self.chunk.id))

    def add(self, s: Term, p: str | Term, o: Term) -> None:
        predicate = Term.iri(p) if isinstance(p, str) else p
        self.triples.setdefault(Triple(s=s, p=predicate, o=o))

    def entity(self, name: str, definition: str = "", embed: bool = True) -> Term | None:
        """The entity called ``name``, labelled and linked to the chunk on first sight;
        None when the name has no letters or digits. ``embed``: sent on for an entity
        vector (with its label and definition) from this chunk."""
        label, definition = tidy(name), tidy(definition)
        iri = entity_iri(label)
        if iri is None:
            return None
        term = Term.iri(iri)
        if term not in self.named:
            self.named.add(term)
            self.add(term, LABEL, Term.literal(label))
            self.add(term, MENTIONED_IN, self.node)
        known = self.entities.get(term)
        if embed and known is None:
            self.entities[term] = EntityContext(entity=term, label=label,
                                                definition=definition)
        elif known is not None and definition and not known.definition:
            self.entities[term] = known.model_copy(update={"definition": definition})
        if definition:
            self.add(term, DEFINITION, Term.literal(definition))
        return term

    def sent(self) -> tuple[ChunkTriples, ChunkEntities]:
        """The records to send: ``records``, or empty ones when nothing was found
        (each chunk sends both, so its graph is known to be done: load-status)."""
        document, chunk = self.chunk.document, self.chunk.id
        return self.records() or (ChunkTriples(document=document, chunk_id=chunk, triples=[]),
                                  ChunkEntities(document=document, chunk_id=chunk, entities=[]))

    def records(self) -> tuple[ChunkTriples, ChunkEntities] | None:
        """The records of what was found, or None when nothing was."""
        if not self.triples:
            return None
        document = self.chunk.document
        self.add(self.node, IN_DOCUMENT, Term.iri(document_iri(document.id)))
        headings = [tidy(h) for h in self.chunk.headings or [] if tidy(h)]
        if headings:
            self.add(self.node, LABEL, Term.literal(HEADING_SEPARATOR.join(headings)))
        if document.title.strip():
            self.add(Term.iri(document_iri(document.id)), LABEL,
                     Term.literal(tidy(document.title)))
        used = {t.p.i for t in self.triples}
        for predicate, label in PREDICATE_LABELS.items():
            if predicate in used:
                self.add(Term.iri(predicate), LABEL, Term.literal(label))
        return (ChunkTriples(document=document, chunk_id=self.chunk.id,
                             triples=list(self.triples)),
                ChunkEntities(document=document, chunk_id=self.chunk.id,
                              entities=list(self.entities.values())))
