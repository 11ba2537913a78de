"""A space: where one kind of point of one (user, collection) lives (store.py); a
point: what a space holds."""
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any


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


@dataclass
class Point:
    id: str
    vector: list[float]
    payload: dict[str, Any] = field(default_factory=dict)


def dense(vector: object) -> list[float]:
    """A stored point's vector: every space has one unnamed dense vector."""
    assert isinstance(vector, list)
    return vector


def is_dimension_error(error: Exception) -> bool:
    """The store refused a vector whose length differs from its collection's (every
    backend says "Vector dimension error: expected dim: N, got M")."""
    return "dimension" in str(error).lower()
