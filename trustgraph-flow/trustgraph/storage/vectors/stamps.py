"""Which embedding model made a scope's vectors: one stamp per (user, collection).

Vectors of two models cannot be compared (even at the same size their numbers mean
different things), so a scope holds the vectors of one model. Its stamp is written
with its first stamped vectors; after that a write or a search whose vectors say
another model is refused (``ModelMismatch``) instead of mixing them or answering
with nonsense neighbours. ``tg-reembed`` moves a scope to another model
(reembed.py): while it runs the stamp says so, and searches are refused until it is
done.

The stamp lives in the point backend itself, as the one point of a space of kind
``models`` (a one-number vector, the model in its payload): every backend stores it
with no code of its own, it is dropped with the scope, and replicas of the vector
store read the same stamp. A scope whose vectors were written before stamps existed
has none, and any model may use it until its first stamped write stamps it.
Requests that do not say which model made their vectors (older clients) are only
checked for the vectors' size, as before.
"""
import time
import uuid
from dataclasses import dataclass

from .spaces import Point, Space

MODELS = "models"
_STAMP_ID = str(uuid.uuid5(uuid.NAMESPACE_URL, "trustgraph:embedding-model-stamp"))
# How long "this scope has no stamp" is believed without asking the backend again:
# long enough that searching an unstamped scope (one written before stamps) costs no
# backend round trip per question, short enough that a stamp another replica of the
# store writes is seen soon.
UNSTAMPED_SECONDS = 5.0


class ModelMismatch(Exception):
    """Vectors of one model offered to a scope stamped with another, or searched in
    a scope that is being re-embedded."""


@dataclass(frozen=True)
class Stamp:
    model: str
    reembedding_from: str | None = None  # set while ``tg-reembed`` runs

    def payload(self) -> dict:
        return {"model": self.model, "reembedding_from": self.reembedding_from}


class ModelStamps:
    def __init__(self, backend) -> None:
        self._backend = backend  # a PointBackend (store.py)
        # Stamps change only through this store (its writes and re-embedding), so a
        # stamp read once stays right; "no stamp" is believed for a few seconds, as
        # another replica of the store may write one.
        self._known: dict[tuple[str, str], Stamp] = {}
        self._unstamped: dict[tuple[str, str], float] = {}  # until when

    async def get(self, user: str, collection: str) -> Stamp | None:
        key = (user, collection)
        if key in self._known:
            return self._known[key]
        if self._unstamped.get(key, 0.0) > time.monotonic():
            return None
        found = await self._backend.payloads(Space(MODELS, user, collection), [_STAMP_ID])
        if not (payload := found.get(_STAMP_ID)):
            self._unstamped[key] = time.monotonic() + UNSTAMPED_SECONDS
            return None
        stamp = Stamp(payload["model"], payload.get("reembedding_from"))
        self._known[(user, collection)] = stamp
        return stamp

    async def put(self, user: str, collection: str, stamp: Stamp) -> None:
        await self._backend.upsert(Space(MODELS, user, collection),
                                   [Point(_STAMP_ID, [1.0], stamp.payload())])
        self._known[(user, collection)] = stamp
        self._unstamped.pop((user, collection), None)

    async def for_write(self, user: str, collection: str, model: str) -> None:
        """Refuse vectors of ``model`` unless the scope is its own (or unstamped, or
        being re-embedded to it); stamp an unstamped scope with it."""
        if not model:
            return
        stamp = await self.get(user, collection)
        if stamp is None:
            await self.put(user, collection, Stamp(model))
        elif stamp.model != model:
            raise ModelMismatch(
                f"{user}/{collection} holds vectors of {stamp.model!r}; these are of "
                f"{model!r}. Embed with {stamp.model!r} (TG_EMBEDDINGS / "
                f"TG_EMBEDDINGS_MODEL), or move the collection to {model!r} with "
                f"tg-reembed -C {collection}")

    async def for_search(self, user: str, collection: str, model: str | None) -> None:
        """Refuse a search whose vector is of another model than the scope's, or any
        search while the scope is being re-embedded."""
        if not model:
            return
        stamp = await self.get(user, collection)
        if stamp is None:
            return
        if stamp.reembedding_from is not None:
            raise ModelMismatch(
                f"{user}/{collection} is being re-embedded from "
                f"{stamp.reembedding_from!r} to {stamp.model!r}: search it when "
                f"tg-reembed has finished (run it again if it was interrupted)")
        if stamp.model != model:
            raise ModelMismatch(
                f"{user}/{collection} was embedded with {stamp.model!r}, but the "
                f"question was embedded with {model!r}: configure the embeddings "
                f"service with {stamp.model!r}, or re-embed the collection with "
                f"tg-reembed -C {collection}")

    async def drop(self, user: str, collection: str) -> None:
        self._known.pop((user, collection), None)
        self._unstamped.pop((user, collection), None)
        await self._backend.drop(Space(MODELS, user, collection))
