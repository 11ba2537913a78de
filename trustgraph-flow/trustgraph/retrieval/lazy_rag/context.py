"""What the answer is written from, built at query time (docs/lazy-rag.md, steps 3–5):
the subgraph's communities described by their best-connected members and heaviest
relations (no stored summaries), the result records of the final frame, and the
``lazy-rag-summary`` prompt's variables."""
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from trustgraph.schema import LazyCommunity, LazyEntity, LazyRelationship, Source

from .communities import Communities
from .confidence import Coverage, Vocabulary, estimate
from .phrases import key_terms
from .subgraph import Subgraph

TEMPLATE = "lazy-rag-summary"
MAX_COMMUNITIES = 5  # the communities holding most of the subgraph's entities
SEPARATOR = " | "
FENCE = re.compile(r"</?\s*graph-data\s*>", re.IGNORECASE)


@dataclass
class Result:
    """Everything but the answer: what the final frame (or ``expand``) carries."""

    entities: list[LazyEntity]
    relationships: list[LazyRelationship]
    statements: list[tuple[str, str, str]]  # each relationship as the LLM reads it
    communities: list[LazyCommunity]
    sources: list[Source]
    coverage: Coverage
    cache: str | None = None  # "hit" / "miss": how the communities were had

    def fields(self) -> dict[str, Any]:
        """The lazy fields of the final record (``expand``'s one record)."""
        return {"entities": self.entities, "relationships": self.relationships,
                "communities": self.communities, "confidence": self.coverage.confidence,
                "missing_info": self.coverage.missing_info, "community_cache": self.cache}


@dataclass
class Relations:
    """The subgraph's relationships as the result records, the sources and the
    prompt's statements read them: all a metadata record needs."""

    relationships: list[LazyRelationship]
    sources: list[Source]
    statements: list[tuple[str, str, str]]


def relations_of(subgraph: Subgraph) -> Relations:
    found = Relations([], [], [])
    for item in subgraph.evidence:
        t, statement = item.triple, subgraph.statement(item.triple)
        text = SEPARATOR.join(statement)
        found.statements.append(statement)
        found.relationships.append(LazyRelationship(
            s=t.s, p=t.p, o=t.o, text=text, document_id=item.document_id,
            chunk_id=item.chunk_id))
        found.sources.append(Source(id=item.chunk_id, document_id=item.document_id,
                                    text=text, s=t.s, p=t.p, o=t.o))
    return found


def build(question: str, subgraph: Subgraph, relations: Relations,
          found: Communities | None) -> Result:
    """``relations``: ``relations_of(subgraph)``."""
    entities = subgraph.entities
    communities = describe(entities, found) if found is not None else []
    kept = {e.id for e in entities}
    exact = {s.iri for s in subgraph.seeds if s.exact and s.iri in kept}
    vocabulary = Vocabulary([*(e.label for e in entities),
                             *(r.text for r in relations.relationships)])
    strengths = [s.score for s in subgraph.seeds if s.iri in kept]
    coverage = estimate(question, key_terms(question, exact), vocabulary, strengths,
                        bool(entities))
    return Result(entities, relations.relationships, relations.statements, communities,
                  relations.sources, coverage)


def describe(entities: list[LazyEntity], found: Communities) -> list[LazyCommunity]:
    """The finest-level communities of ``entities`` (each entity's ``community`` set),
    the ones holding most of them first."""
    if not found.levels:
        return []
    index, level0 = found.index, found.levels[0]
    held: Counter[int] = Counter()
    for entity in entities:
        node = index.get(entity.id)
        if node is not None:
            entity.community = f"c{level0[node]}"
            held[level0[node]] += 1
    return [_community(found, c) for c, _ in held.most_common(MAX_COMMUNITIES)]


def _community(found: Communities, community: int) -> LazyCommunity:
    def name(node: int) -> str:
        return found.labels.get(node) or found.nodes[node]
    return LazyCommunity(
        id=f"c{community}", level=0, size=found.sizes[community],
        members=[name(n) for n in found.members.get(community, [])],
        relations=[f"{name(s)} — {name(o)}" + (f" ({w} links)" if w > 1 else "")
                   for s, o, w in found.relations.get(community, [])])


def prompt_variables(question: str, result: Result) -> dict[str, Any]:
    """The ``lazy-rag-summary`` variables; the template fences them as data."""
    return {
        "query": question,
        "entities": [{"name": data(e.label or e.id)} for e in result.entities],
        "relationships": [{"s": data(s), "p": data(p), "o": data(o)}
                          for s, p, o in result.statements],
        "communities": [data(", ".join(c.members) + (
            f" (related: {'; '.join(c.relations)})" if c.relations else ""))
            for c in result.communities],
        "missing_info": result.coverage.missing_info,
    }


def data(text: str) -> str:
    """Graph text with the template's fence markers taken out, so no label can close
    the data block early and pose as instructions (prompt-injection hygiene)."""
    return FENCE.sub("", text)
