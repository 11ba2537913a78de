"""Moving a scope to another embedding model (service ``reembed``, ``tg-reembed``).

Every chunk and entity vector is computed again from what the store kept beside it
(a chunk's text, heading path and title; an entity's label) and written in place
over the old one, a page at a time. Meanwhile the scope's stamp says it is being
re-embedded (stamps.py), so searches are refused rather than answered from a mix of
two models' vectors; the stamp names the new model only once every vector is
written. Interrupted, the scope stays refused until it is re-embedded again (every
vector once more: which were done is not tracked).

What is not kept cannot be embedded again: an entity extracted with a definition
was embedded as "label: definition", and is embedded from its label alone here.
A model whose vectors have another size cannot overwrite the old ones in place:
that is refused before anything changes (delete the collection and load it again).
"""
from collections.abc import AsyncIterator, Awaitable, Callable

from ...chunking.context import embedded_text
from .spaces import Point, Space
from .stamps import ModelMismatch, Stamp
from .store import CHUNKS, ENTITIES, VectorStore

# Texts to vectors, and the model that made them.
Embed = Callable[[list[str]], Awaitable[tuple[list[list[float]], str]]]


class Progress:
    def __init__(self, total: int, previous: str | None) -> None:
        self.total, self.previous = total, previous
        self.model: str | None = None
        self.done = {CHUNKS: 0, ENTITIES: 0}


def text_of(kind: str, payload: dict, embed_title: bool) -> str:
    """What the vector of a stored point is computed from."""
    if kind == ENTITIES:
        return payload.get("label") or payload["entity"].get("i") or ""
    meta = payload.get("meta") or {}
    return embedded_text(payload.get("text", ""), meta.get("header_titles"),
                         payload.get("title", "") if embed_title else "")


async def reembed(store: VectorStore, user: str, collection: str, embed: Embed,
                  embed_title: bool = True, page: int = 64) -> AsyncIterator[Progress]:
    """Re-embed the scope, yielding the progress after each page written."""
    counts = await store.count(user, collection)
    before = await store.stamps.get(user, collection)
    previous = (before.reembedding_from or before.model) if before else None
    progress = Progress(sum(counts.values()), previous)
    for kind in (CHUNKS, ENTITIES):
        space, after = Space(kind, user, collection), None
        while True:
            points, after = await store.backend.page(space, after, page)
            if points:
                await _rewrite(store, space, points, embed, embed_title, progress)
                progress.done[kind] += len(points)
                yield progress
            if after is None:
                break
    if progress.model is not None:
        await store.stamps.put(user, collection, Stamp(progress.model))


async def _rewrite(store: VectorStore, space: Space, points: list[Point], embed: Embed,
                   embed_title: bool, progress: Progress) -> None:
    vectors, model = await embed([text_of(space.kind, p.payload, embed_title)
                                  for p in points])
    if progress.model is None:  # the first page: the scope is now being moved
        progress.model = model
        await store.stamps.put(space.user, space.collection,
                               Stamp(model, progress.previous or "an unstamped model"))
    elif model != progress.model:
        raise ModelMismatch(f"the embeddings service changed model from "
                            f"{progress.model!r} to {model!r} during re-embedding")
    try:
        await _write(store, space, points, vectors)
    except Exception as error:
        if "dimension" not in str(error).lower():
            raise
        if progress.done[CHUNKS] + progress.done[ENTITIES] == 0:  # nothing changed yet
            if progress.previous:
                await store.stamps.put(space.user, space.collection,
                                       Stamp(progress.previous))
            else:
                await store.stamps.drop(space.user, space.collection)
        raise ModelMismatch(
            f"{model!r} makes vectors of {len(vectors[0])} numbers, and "
            f"{space.user}/{space.collection} holds vectors of another size: they "
            f"cannot be replaced in place; delete the collection and load its "
            f"documents again") from None


async def _write(store: VectorStore, space: Space, points: list[Point],
                 vectors: list[list[float]]) -> None:
    """The new vectors under the payloads as they are now: an entity's documents list
    may have grown, or a point gone, while the page was being embedded (the store's
    own lock keeps its merges and this write apart)."""
    async with store.merging:
        now = await store.backend.payloads(space, [p.id for p in points])
        await store.backend.upsert(space, [
            Point(p.id, vector, now[p.id])
            for p, vector in zip(points, vectors, strict=True) if p.id in now])
