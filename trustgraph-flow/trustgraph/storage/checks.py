"""The store owners' own checks, for their state records (``base/state.py``) and so
``tg-verify-system-status``: a read, then a write taken back, in a scope no user can
have (a user name must start with a letter or digit: ``schema/keys.py``).
"""
from collections.abc import Awaitable, Callable

from trustgraph.base.state import StoreProbe, StoreUnreadable
from trustgraph.schema import Term

PROBE_USER = "_tg-status"
PROBE_COLLECTION = "probe"
PROBE_TERM = Term.iri("urn:tg:status:probe")

Scoped = Callable[[str, str], Awaitable[object]]  # called with (user, collection)


def store_probe(read: Scoped, write: Scoped, take_back: Scoped) -> StoreProbe:
    """``read`` (its failure: unreadable), then ``write`` and ``take_back``, each in
    the probe's scope."""
    async def probe() -> None:
        try:
            await read(PROBE_USER, PROBE_COLLECTION)
        except Exception as error:
            raise StoreUnreadable(f"{type(error).__name__}: {error}") from error
        await write(PROBE_USER, PROBE_COLLECTION)
        await take_back(PROBE_USER, PROBE_COLLECTION)
    return probe
