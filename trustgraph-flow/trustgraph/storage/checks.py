"""The store owners' own checks, for their state records (``base/state.py``) and so
``tg-verify-system-status``: a read, then a write taken back, in a scope no user can
have (a user name must start with a letter or digit: ``schema/keys.py``).
"""
from trustgraph.base.state import StoreProbe, StoreUnreadable
from trustgraph.schema import Term, Triple

from .triples.store import TriplesStore
from .vectors.store import EntityVector, VectorStore

PROBE_USER = "_tg-status"
PROBE_COLLECTION = "probe"
_PROBE = Term.iri("urn:tg:status:probe")


def triples_probe(store: TriplesStore) -> StoreProbe:
    async def probe() -> None:
        try:
            await store.count(PROBE_USER, PROBE_COLLECTION)
        except Exception as error:
            raise StoreUnreadable(f"{type(error).__name__}: {error}") from error
        await store.add(PROBE_USER, PROBE_COLLECTION,
                        [Triple(s=_PROBE, p=_PROBE, o=Term.literal("written"))],
                        document="probe")
        await store.delete_collection(PROBE_USER, PROBE_COLLECTION)
    return probe


def vectors_probe(store: VectorStore) -> StoreProbe:
    async def probe() -> None:
        try:
            await store.count(PROBE_USER, PROBE_COLLECTION)
        except Exception as error:
            raise StoreUnreadable(f"{type(error).__name__}: {error}") from error
        await store.upsert_entities(PROBE_USER, PROBE_COLLECTION,
                                    [EntityVector(_PROBE, [1.0, 0.0, 0.0], "probe")])
        await store.delete_collection(PROBE_USER, PROBE_COLLECTION)
    return probe
