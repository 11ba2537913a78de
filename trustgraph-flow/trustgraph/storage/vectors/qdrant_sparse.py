"""The lexical index on a Qdrant server (lexical.py's contract): Qdrant's own sparse
vectors with the IDF modifier, so the distributed mode needs no second store.

One collection per scope (``lexical-<hash>``), holding only a sparse vector per chunk:
its words' BM25 term-frequency weights (the server multiplies in each word's IDF
at query time, over that collection alone). A word's dimension is a stable hash of
the word. There is no stemmer here (FTS5 has Porter's): exact words only.
qdrant-client's local mode implements the IDF modifier too, which is how the
contract tests run this without a server.
"""
import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from qdrant_client import AsyncQdrantClient, models

from .lexical import LEXICAL, LexicalChunk, query_terms
from .matches import ChunkMatch
from .spaces import Space
from .store import point_id

SPARSE = "bm25"
K1, B, AVERAGE_WORDS = 1.2, 0.75, 150  # BM25's usual constants; chunks run ~150 words
TITLE_REPEAT = 2  # a title word counts as two body words (lexical.WEIGHTS, roughly)


def dimension(word: str) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big")


def document_vector(chunk: LexicalChunk) -> models.SparseVector:
    """BM25's saturated term frequencies of the chunk's words (title and heading
    words repeated, so they weigh more)."""
    words = re.findall(r"\w+", chunk.text.lower())
    words += re.findall(r"\w+", f"{chunk.title} {chunk.headings}".lower()) * TITLE_REPEAT
    counts = Counter(words)
    norm = K1 * (1 - B + B * len(words) / AVERAGE_WORDS)
    weights: dict[int, float] = {}
    for word, tf in counts.items():
        weights[dimension(word)] = weights.get(dimension(word), 0) + tf * (K1 + 1) / (tf + norm)
    return models.SparseVector(indices=list(weights), values=list(weights.values()))


def query_vector(query: str) -> models.SparseVector | None:
    terms = {dimension(t) for t in query_terms(query)}
    return models.SparseVector(indices=list(terms), values=[1.0] * len(terms)) \
        if terms else None


class QdrantSparseIndex:
    def __init__(self, client: AsyncQdrantClient):
        self._client = client

    def _name(self, user: str, collection: str) -> str:
        return Space(LEXICAL, user, collection).name

    async def _ensure(self, name: str) -> None:
        if await self._client.collection_exists(name):
            return
        try:
            await self._client.create_collection(name, vectors_config={},
                sparse_vectors_config={SPARSE: models.SparseVectorParams(
                    modifier=models.Modifier.IDF)})
        except Exception:
            if not await self._client.collection_exists(name):
                raise  # not another writer creating it first
        await self._client.create_payload_index(
            name, "document", field_schema=models.PayloadSchemaType.KEYWORD)

    async def upsert(self, user: str, collection: str,
                     chunks: Sequence[LexicalChunk]) -> None:
        if not chunks:
            return
        name = self._name(user, collection)
        await self._ensure(name)
        await self._client.upsert(name, wait=True, points=[models.PointStruct(
            id=point_id(c.chunk_id), vector={SPARSE: document_vector(c)}, payload={
                "chunk_id": c.chunk_id, "document": c.document, "title": c.title,
                "text": c.text, "version": c.version, "index": c.index, "meta": c.meta})
            for c in chunks])

    async def search(self, user: str, collection: str, query: str,
                     limit: int) -> list[ChunkMatch]:
        name, vector = self._name(user, collection), query_vector(query)
        if vector is None or not await self._client.collection_exists(name):
            return []
        found = await self._client.query_points(name, query=vector, using=SPARSE,
                                                limit=limit, with_payload=True)
        return [_match(p.payload or {}, p.score) for p in found.points]

    async def remove_document(self, user: str, collection: str, document: str) -> None:
        await self._delete(user, collection, [models.FieldCondition(
            key="document", match=models.MatchValue(value=document))])

    async def remove_stale(self, user: str, collection: str, document: str, version: int,
                           total: int) -> int:
        return await self._delete(user, collection, [
            models.FieldCondition(key="document", match=models.MatchValue(value=document)),
            models.FieldCondition(key="version", range=models.Range(lt=version)),
            models.FieldCondition(key="index", range=models.Range(gte=total))])

    async def _delete(self, user: str, collection: str,
                      must: list[models.FieldCondition]) -> int:
        name = self._name(user, collection)
        if not await self._client.collection_exists(name):
            return 0
        where = models.Filter(must=must)
        count = (await self._client.count(name, count_filter=where, exact=True)).count
        if count:
            await self._client.delete(name, wait=True,
                                      points_selector=models.FilterSelector(filter=where))
        return count

    async def delete_collection(self, user: str, collection: str) -> None:
        name = self._name(user, collection)
        if await self._client.collection_exists(name):
            await self._client.delete_collection(name)

    async def count(self, user: str, collection: str) -> int:
        name = self._name(user, collection)
        if not await self._client.collection_exists(name):
            return 0
        return (await self._client.count(name, exact=True)).count

    async def close(self) -> None:
        pass  # the client is the vector backend's, closed with it


def _match(payload: dict[str, Any], score: float) -> ChunkMatch:
    return ChunkMatch(payload["chunk_id"], payload["document"], payload["title"],
                      payload["text"], score, payload.get("meta") or {})
