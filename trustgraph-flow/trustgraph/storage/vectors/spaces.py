"""A space: where one kind of point of one (user, collection) lives (store.py)."""
import hashlib
import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Space:
    kind: str
    user: str
    collection: str

    @property
    def name(self) -> str:
        """A name safe for a directory or collection, whatever the user and collection
        names contain (they never reach a path or a query as text)."""
        scope = hashlib.sha256(json.dumps([self.user, self.collection]).encode()).hexdigest()
        return f"{self.kind}-{scope[:40]}"


def dense(vector: object) -> list[float]:
    """A stored point's vector: every space has one unnamed dense vector."""
    assert isinstance(vector, list)
    return vector
