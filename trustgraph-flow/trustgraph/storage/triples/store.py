"""What every triples store does, and N-hop expansion built on it.

Every operation is scoped by ``(user, collection)``: nothing stored under one scope is
ever visible from another. Each triple carries provenance (document, chunk), so removing
a document removes the triples only it supported; adding the same triple again from the
same document and chunk changes nothing.
"""
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from trustgraph.schema import RDFS_LABEL, Term, Triple

# One triple as found in one chunk of one document: (s, p, o, o is an IRI, document,
# chunk) — a knowledge core's unit (schema/cores.py ``CoreTriple``), as plain values:
# a core of a million of them is read and written without an object per term.
ProvenanceRow = tuple[str, str, str, bool, str, str]


class TriplesStore(Protocol):
    async def add(self, user: str, collection: str, triples: Iterable[Triple], *,
                  document: str, chunk: str = "") -> None:
        """Store triples found in ``chunk`` of ``document``. Subjects and predicates
        must be IRIs."""

    async def query(self, user: str, collection: str, s: Term | None = None,
                    p: Term | None = None, o: Term | None = None,
                    limit: int = 10000) -> list[Triple]:
        """Distinct triples matching the bound positions (none bound: any triple)."""

    async def neighbours(self, user: str, collection: str, entities: Iterable[Term],
                         limit_per_entity: int = 30, limit: int | None = None
                         ) -> list[Triple]:
        """Distinct triples having any of ``entities`` (IRIs; literals are ignored) as
        subject or object, at most ``limit_per_entity`` per entity and ``limit`` in
        all (None: no limit), in ONE round trip."""

    async def labels(self, user: str, collection: str,
                     entities: Iterable[Term]) -> dict[Term, str]:
        """The ``rdfs:label`` of each IRI entity that has one, in one round trip."""

    async def provenance(self, user: str, collection: str, triples: Iterable[Triple],
                         prefer: Sequence[str] = ()) -> dict[Triple, tuple[str, str]]:
        """Where each stored triple among ``triples`` came from, in ONE round trip:
        its least ``(document, chunk)`` pair among those whose chunk is in ``prefer``
        if any is, else among all (a triple found in several chunks names one of
        them, the same one on every backend). Triples not stored in the scope are
        absent from the answer."""

    async def chunk_triples(self, user: str, collection: str,
                            chunks: Iterable[str]) -> dict[str, list[Triple]]:
        """The triples extracted from each of ``chunks``, in ONE round trip; each
        chunk's in ascending (s, p, o) order, an IRI object before a literal of the
        same text. Chunks with none are absent."""

    async def remove_document(self, user: str, collection: str, document: str) -> None:
        """Forget the document's provenance; drop triples nothing else supports."""

    async def delete_collection(self, user: str, collection: str) -> int:
        """Delete everything the scope holds (bumping its version); how many distinct
        triples it held. Deleting again, or a scope never written, removes nothing: 0."""

    async def count(self, user: str, collection: str) -> int:
        """Distinct triples in the collection."""

    async def version(self, user: str, collection: str) -> int:
        """The scope's graph version: 0 before any write, then bumped by every write or
        removal that changes which triples the scope holds (deleting the collection
        included, so a version is never seen twice)."""

    async def edges(self, user: str, collection: str, after: int = 0,
                    limit: int = 10000) -> "EdgePage":
        """A page of the scope's entity graph: pairs of distinct IRIs joined by
        triples, with how many, and labels of IRIs. ``after`` is 0 or the ``next`` of
        the page before; a pair may recur on later pages (its weights add up). Read
        to the end, the pages give every IRI's label, though not necessarily on the
        page of its edges."""

    async def provenance_page(self, user: str, collection: str, after: str = "",
                              limit: int = 1000) -> tuple[list[ProvenanceRow], str | None]:
        """A page of the scope's (triple, document, chunk) rows in a stable order, and
        the ``after`` of the next page (None: this was the last). ``after`` is "" or
        a ``next`` this store gave."""

    async def add_provenance(self, user: str, collection: str,
                             rows: Sequence[ProvenanceRow]) -> None:
        """Store rows as ``provenance_page`` gives them, each triple found in its own
        document and chunk (in one write where the backend can)."""

    async def provenance_count(self, user: str, collection: str) -> int:
        """The scope's (triple, document, chunk) rows: what its pages hold."""

    async def close(self) -> None: ...


@dataclass(frozen=True)
class EdgePage:
    """A page of the entity graph as the JSON its ``graph-edges`` record carries: a
    page names thousands of IRIs, and its only reader is the community computation's
    child process, so the store process never holds them as Python objects if its
    backend can write the JSON itself (SQLite does, in C, without the GIL)."""

    edges: bytes  # JSON array of [subject IRI, object IRI, triples joining them]
    labels: bytes  # JSON object: IRI → rdfs:label
    next: int | None  # the cursor of the next page; None: this was the last

    @classmethod
    def of(cls, weights: Mapping[tuple[str, str], int], labels: Mapping[str, str],
           next: int | None) -> "EdgePage":
        """The page of a backend that reads the pairs and labels as Python values."""
        return cls(_json([(s, o, w) for (s, o), w in weights.items()]), _json(labels),
                   next)


def _json(value) -> bytes:
    """As the bus encodes a record's fields (pydantic: compact, UTF-8 unescaped)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Subgraph:
    triples: list[Triple]
    entities: list[Term]  # seeds first, then in the order they were reached
    hops: int  # round trips made


async def expand(store: TriplesStore, user: str, collection: str, seeds: Iterable[Term], *,
                 max_hops: int = 2, max_entities: int = 50, max_triples: int = 150,
                 triples_per_entity: int = 30) -> Subgraph:
    """Breadth-first expansion from ``seeds``: one ``neighbours`` round trip per hop.

    A hop follows edges in both directions from the entities reached by the previous
    hop. Triples beyond ``max_triples`` are dropped; entities beyond ``max_entities``
    are not followed (the triple that reached them is kept). ``rdfs:label`` triples
    are left out: labels are looked up for the whole subgraph afterwards, and a label
    triple would spend the triple budget on what every statement already shows.
    """
    seen = dict.fromkeys(list(dict.fromkeys(t for t in seeds if t.is_iri))[:max_entities])
    found: dict[Triple, None] = {}  # an ordered set
    frontier, hops = list(seen), 0
    while frontier and hops < max_hops and len(found) < max_triples:
        hops += 1
        reached = []
        # Room for the triples still wanted and the frontier's label triples (left
        # out below): a hop reads no rows past what the budget can keep.
        room = max_triples - len(found) + len(frontier)
        for triple in await store.neighbours(user, collection, frontier, triples_per_entity,
                                             room):
            if triple.p.i == RDFS_LABEL:
                continue
            if len(found) >= max_triples:
                break
            found.setdefault(triple)
            for term in (triple.s, triple.o):
                if term.is_iri and term not in seen and len(seen) < max_entities:
                    seen[term] = None
                    reached.append(term)
        frontier = reached
    return Subgraph(list(found), list(seen), hops)


def iris(entities: Iterable[Term]) -> list[str]:
    """The distinct IRIs among ``entities``, in order."""
    return list(dict.fromkeys(t.value for t in entities if t.is_iri))


def check_addable(triple: Triple) -> None:
    if not (triple.s.is_iri and triple.p.is_iri):
        raise ValueError(f"subject and predicate must be IRIs: {triple}")


@lru_cache(maxsize=32768)
def make_triple(s: str, p: str, o: str, o_is_iri: bool) -> Triple:
    """A triple from stored values. Reads return thousands of triples over far fewer
    distinct terms, and a subgraph request reads the same hub triples again and
    again; both are immutable: recent ones are shared, not rebuilt (validating one
    costs ~6 µs)."""
    return Triple(s=_term("i", s), p=_term("i", p), o=_term("i" if o_is_iri else "l", o))


@lru_cache(maxsize=16384)
def _term(t: str, value: str) -> Term:
    return Term(t="i", i=value) if t == "i" else Term(t="l", v=value)
