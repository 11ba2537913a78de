"""Qdrant server, the distributed vector backend, through ``qdrant-client``'s async
client: one Qdrant collection per space (see store.py). The same code runs against
the client's local mode (``location=":memory:"`` or ``path=``), which is how the
contract tests exercise it without a server.
"""
from qdrant_client import AsyncQdrantClient, models

from .spaces import dense
from .store import Point, Space


class QdrantServerBackend:
    def __init__(self, client: AsyncQdrantClient):
        self._client = client
        self._known: set[str] = set()  # collections seen to exist

    @property
    def client(self) -> AsyncQdrantClient:
        """Shared with the sparse lexical index (qdrant_sparse.py)."""
        return self._client

    @classmethod
    def connect(cls, url: str, api_key: str | None = None) -> "QdrantServerBackend":
        return cls(AsyncQdrantClient(url=url, api_key=api_key))

    async def _exists(self, name: str) -> bool:
        if name not in self._known and await self._client.collection_exists(name):
            self._known.add(name)
        return name in self._known

    async def _create(self, name: str, dimension: int) -> None:
        try:
            await self._client.create_collection(name, vectors_config=models.VectorParams(
                size=dimension, distance=models.Distance.COSINE))
        except Exception:
            if not await self._client.collection_exists(name):
                raise  # not another writer creating it first
        await self._client.create_payload_index(
            name, "documents", field_schema=models.PayloadSchemaType.KEYWORD)
        self._known.add(name)

    async def upsert(self, space: Space, points: list[Point]) -> None:
        if not points:
            return
        if not await self._exists(space.name):
            await self._create(space.name, len(points[0].vector))
        await self._client.upsert(space.name, wait=True, points=[
            models.PointStruct(id=p.id, vector=p.vector, payload=p.payload) for p in points])

    async def payloads(self, space: Space, ids: list[str]) -> dict[str, dict]:
        if not ids or not await self._exists(space.name):
            return {}
        records = await self._client.retrieve(space.name, ids, with_payload=True)
        return {str(r.id): r.payload or {} for r in records}

    async def search(self, space: Space, vector: list[float],
                     limit: int) -> list[tuple[dict, float]]:
        if not await self._exists(space.name):
            return []
        found = await self._client.query_points(space.name, query=vector, limit=limit,
                                                with_payload=True)
        return [(p.payload or {}, p.score) for p in found.points]

    async def referencing(self, space: Space, document: str) -> list[Point]:
        if not await self._exists(space.name):
            return []
        where = models.Filter(must=[models.FieldCondition(
            key="documents", match=models.MatchValue(value=document))])
        points: list[Point] = []
        offset = None
        while True:
            page, offset = await self._client.scroll(
                space.name, scroll_filter=where, limit=1000, offset=offset,
                with_payload=True, with_vectors=True)
            points += [Point(str(r.id), dense(r.vector), r.payload or {}) for r in page]
            if offset is None:
                return points

    async def page(self, space: Space, after: str | None, limit: int,
                   vectors: bool = False) -> tuple[list[Point], str | None]:
        if not await self._exists(space.name):
            return [], None
        found, following = await self._client.scroll(
            space.name, limit=limit, offset=after, with_payload=True, with_vectors=vectors)
        return [Point(str(r.id), dense(r.vector) if vectors else [], r.payload or {})
                for r in found], None if following is None else str(following)

    async def delete(self, space: Space, ids: list[str]) -> None:
        if ids and await self._exists(space.name):
            await self._client.delete(space.name, wait=True,
                                      points_selector=models.PointIdsList(points=ids))

    async def drop(self, space: Space) -> None:
        self._known.discard(space.name)
        if await self._client.collection_exists(space.name):
            await self._client.delete_collection(space.name)

    async def count(self, space: Space) -> int:
        if not await self._exists(space.name):
            return 0
        return (await self._client.count(space.name, exact=True)).count

    async def count_matching(self, space: Space,
                             matches: list[dict[str, str | int]]) -> list[int]:
        if not await self._exists(space.name):
            return [0] * len(matches)
        return [(await self._client.count(space.name, exact=True, count_filter=models.Filter(
            must=[models.FieldCondition(key=key, match=models.MatchValue(value=value))
                  for key, value in match.items()]))).count for match in matches]

    async def close(self) -> None:
        await self._client.close()
