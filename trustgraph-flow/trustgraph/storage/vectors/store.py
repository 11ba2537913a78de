"""Chunk vectors and entity vectors, scoped by (user, collection), over any point
backend (Qdrant Edge embedded, Qdrant server).

A backend only stores points in *spaces*: one space per (kind, user, collection),
each a separate shard or collection, so one scope's query can never reach another's
points. Everything else — ids, payloads, which documents support a point — is decided
here once, for every backend.

Each point lists the documents it came from. A chunk has one; an entity vector is
shared by every document that mentions the entity, so removing a document deletes
the points it alone supported and takes itself off the others' lists.
"""
import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from trustgraph.schema import Term

from .lexical import LexicalChunk, LexicalIndex
from .matches import ChunkMatch
from .spaces import Point, Space
from .stamps import ModelStamps

CHUNKS, ENTITIES = "chunks", "entities"
_IDS = uuid.UUID("5c0f3d52-5d0e-4d0b-9a52-7d3c0ae7c1b1")


class PointBackend(Protocol):
    """Points in spaces. A space is created by its first upsert (its dimension is
    that vector's length); reading a space that does not exist finds nothing."""

    async def upsert(self, space: Space, points: list[Point]) -> None: ...
    async def payloads(self, space: Space, ids: list[str]) -> dict[str, dict]: ...
    async def search(self, space: Space, vector: list[float],
                     limit: int) -> list[tuple[dict, float]]: ...
    async def referencing(self, space: Space, document: str) -> list[Point]:
        """Points (with vectors) whose ``documents`` list contains ``document``."""
    async def page(self, space: Space, after: str | None, limit: int,
                   vectors: bool = False) -> tuple[list[Point], str | None]:
        """Up to ``limit`` points (their vectors only if ``vectors``) in a stable order
        from ``after`` (None: the first) on, and the ``after`` of the next page (None:
        that was the last)."""
    async def delete(self, space: Space, ids: list[str]) -> None: ...
    async def drop(self, space: Space) -> None: ...
    async def count(self, space: Space) -> int: ...
    async def count_matching(self, space: Space,
                             matches: list[dict[str, str | int]]) -> list[int]:
        """For each of ``matches``, how many points have each of its payload values
        (a list-valued field matches when it holds the value)."""
    async def close(self) -> None: ...


@dataclass(frozen=True)
class ChunkVector:
    chunk_id: str
    document: str
    vector: list[float]
    text: str = ""
    title: str = ""
    version: int = 0  # of the document, as the chunk's DocumentRef says
    index: int | None = None  # of the chunk in its document
    headings: str = ""  # the heading path above it, as text (indexed with the words)
    meta: dict[str, Any] = field(default_factory=dict)  # citation details, as given

    def lexical(self) -> LexicalChunk:
        return LexicalChunk(self.chunk_id, self.document, self.text, self.title,
                            self.headings, self.version, self.index, self.meta)


@dataclass(frozen=True)
class EntityVector:
    entity: Term
    vector: list[float]
    label: str = ""
    document: str = ""


@dataclass(frozen=True)
class EntityMatch:
    entity: Term
    label: str
    score: float


def point_id(key: str) -> str:
    return str(uuid.uuid5(_IDS, key))


def entity_key(entity: Term) -> str:
    return f"{entity.t}\0{entity.value}"


class VectorStore:
    def __init__(self, backend: PointBackend, lexical: LexicalIndex | None = None):
        """``lexical``: the BM25 index kept beside the chunk vectors (written, searched
        and emptied with them); None: lexical search finds nothing."""
        self.backend = backend
        self.lexical = lexical
        # Entity upserts and document removal read, merge and write back the
        # documents lists: one at a time in this process, or one would undo another.
        # (Writers in different processes can still race: see docs/storage.md.)
        self.merging = asyncio.Lock()
        self.stamps = ModelStamps(backend)

    async def model_of(self, user: str, collection: str) -> str | None:
        """The embedding model whose vectors the scope holds (stamps.py); None for a
        scope with no stamped vectors."""
        stamp = await self.stamps.get(user, collection)
        return stamp.model if stamp else None

    async def upsert_chunks(self, user: str, collection: str,
                            chunks: Sequence[ChunkVector], model: str = "") -> None:
        """Add or replace chunk vectors (a chunk id names one chunk per collection).
        ``model``: the embedding model that made them (stamps.py; "": not said)."""
        if chunks:
            await self.stamps.for_write(user, collection, model)
            await self.backend.upsert(Space(CHUNKS, user, collection), [Point(
                point_id(c.chunk_id), list(c.vector),
                {"chunk_id": c.chunk_id, "title": c.title, "text": c.text,
                 "documents": [c.document], "version": c.version, "index": c.index,
                 "meta": c.meta})
                for c in chunks])
            # After the vectors: a crash between the two leaves the chunk's record
            # unacknowledged, and its redelivery writes both again.
            if self.lexical:
                await self.lexical.upsert(user, collection, [c.lexical() for c in chunks])

    async def remove_stale_chunks(self, user: str, collection: str, document: str,
                                  version: int, total: int) -> int:
        """Drops the chunks that earlier versions of ``document`` had beyond the
        ``total`` chunks of ``version`` (the chunks below are overwritten by that
        version's own); returns how many."""
        space = Space(CHUNKS, user, collection)
        stale = [p.id for p in await self.backend.referencing(space, document)
                 if p.payload.get("version", 0) < version
                 and p.payload.get("index") is not None and p.payload["index"] >= total]
        if stale:
            await self.backend.delete(space, stale)
        if self.lexical:
            await self.lexical.remove_stale(user, collection, document, version, total)
        return len(stale)

    async def stored_chunks(self, user: str, collection: str,
                            documents: Sequence[tuple[str, int] | tuple[str, int, int]]
                            ) -> list[int]:
        """How many chunk vectors each (document, version) has stored; a (document,
        version, index) counts that one chunk (0 or 1)."""
        if not documents:
            return []
        return await self.backend.count_matching(Space(CHUNKS, user, collection), [
            {"documents": which[0], "version": which[1],
             **({"index": which[2]} if len(which) > 2 else {})} for which in documents])

    async def upsert_entities(self, user: str, collection: str,
                              entities: Sequence[EntityVector], model: str = "") -> None:
        """Add or replace entity vectors; the documents already supporting an entity
        are kept (one point per entity, however many documents mention it)."""
        await self.put_entities(user, collection, [(e, [e.document]) for e in entities],
                                model)

    async def put_entities(self, user: str, collection: str,
                           entities: Sequence[tuple[EntityVector, list[str]]],
                           model: str = "") -> None:
        """Entity vectors, each with the documents that support it: added to the
        documents already stored for it, never replacing them. ``model``: as for
        ``upsert_chunks``."""
        if not entities:
            return
        await self.stamps.for_write(user, collection, model)
        space = Space(ENTITIES, user, collection)
        points = {point_id(entity_key(e.entity)): (e, documents) for e, documents in entities}
        async with self.merging:
            known = await self.backend.payloads(space, list(points))
            await self.backend.upsert(space, [Point(id, list(e.vector), {
                "entity": e.entity.model_dump(exclude_none=True), "label": e.label,
                "documents": _merged(known.get(id, {}).get("documents", []), documents)})
                for id, (e, documents) in points.items()])

    async def page(self, kind: str, user: str, collection: str, after: str | None,
                   limit: int) -> tuple[list[Point], str | None]:
        """A page of the scope's chunk or entity points (``kind``), with their vectors."""
        return await self.backend.page(Space(kind, user, collection), after, limit,
                                       vectors=True)

    async def search_chunks(self, user: str, collection: str, vector: Sequence[float],
                            limit: int = 10, model: str | None = None) -> list[ChunkMatch]:
        """``model``: the embedding model that made ``vector`` (None: not said)."""
        await self.stamps.for_search(user, collection, model)
        found = await self.backend.search(Space(CHUNKS, user, collection), list(vector), limit)
        return [ChunkMatch(p["chunk_id"], p["documents"][0], p["title"], p["text"], score,
                           p.get("meta") or {}) for p, score in found]

    async def search_lexical(self, user: str, collection: str, query: str,
                             limit: int = 10) -> list[ChunkMatch]:
        """The chunks whose words best match ``query`` (BM25, best first)."""
        if not self.lexical:
            return []
        return [ChunkMatch(m.chunk_id, m.document, m.title, m.text, m.score, m.meta)
                for m in await self.lexical.search(user, collection, query, limit)]

    async def lexical_count(self, user: str, collection: str) -> int:
        return await self.lexical.count(user, collection) if self.lexical else 0

    async def search_entities(self, user: str, collection: str, vector: Sequence[float],
                              limit: int = 10, model: str | None = None
                              ) -> list[EntityMatch]:
        await self.stamps.for_search(user, collection, model)
        found = await self.backend.search(Space(ENTITIES, user, collection), list(vector),
                                          limit)
        return [EntityMatch(Term.model_validate(p["entity"]), p["label"], score)
                for p, score in found]

    async def remove_document(self, user: str, collection: str, document: str) -> None:
        async with self.merging:
            for kind in (CHUNKS, ENTITIES):
                await self._remove_document(Space(kind, user, collection), document)
            if self.lexical:
                await self.lexical.remove_document(user, collection, document)

    async def _remove_document(self, space: Space, document: str) -> None:
        points = await self.backend.referencing(space, document)
        gone = [p.id for p in points if p.payload["documents"] == [document]]
        kept = [Point(p.id, p.vector, {**p.payload, "documents": [
            d for d in p.payload["documents"] if d != document]})
            for p in points if p.payload["documents"] != [document]]
        if gone:
            await self.backend.delete(space, gone)
        if kept:
            await self.backend.upsert(space, kept)

    async def delete_collection(self, user: str, collection: str) -> dict[str, int]:
        """Drops the scope's chunk and entity vectors, its model stamp and its lexical
        index; what it held of each (``chunks``, ``entities``, ``lexical``). Deleting
        again, or a scope never written, removes nothing: zeros."""
        held = {**await self.count(user, collection),
                "lexical": await self.lexical_count(user, collection)}
        for kind in (CHUNKS, ENTITIES):
            await self.backend.drop(Space(kind, user, collection))
        await self.stamps.drop(user, collection)
        if self.lexical:
            await self.lexical.delete_collection(user, collection)
        return held

    async def count(self, user: str, collection: str) -> dict[str, int]:
        return {kind: await self.backend.count(Space(kind, user, collection))
                for kind in (CHUNKS, ENTITIES)}

    async def close(self) -> None:
        if self.lexical:
            await self.lexical.close()
        await self.backend.close()


def _merged(documents: list[str], more: list[str]) -> list[str]:
    return documents + [d for d in dict.fromkeys(more) if d and d not in documents]
