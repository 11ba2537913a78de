"""Communities of a collection's entity graph, as the cache keeps them and a query
reads them. They are computed by ``leiden.py``, in a child process of its own, so
the serving process never imports igraph, leidenalg or numpy (~1 s of start-up).
"""
from dataclasses import asdict, dataclass
from functools import cached_property


@dataclass
class Communities:
    """The communities of one (user, collection) at one graph ``version``."""

    version: int
    nodes: list[str]  # entity IRIs; a node is its index here
    labels: dict[int, str]  # of the members and relation ends kept below
    levels: list[list[int]]  # levels[level][node] = its community at that level
    sizes: list[int]  # level-0 community → number of members
    members: dict[int, list[int]]  # level-0 community → its best-connected members
    relations: dict[int, list[tuple[int, int, int]]]  # → its heaviest (s, o, weight)
    computed_at: float = 0.0
    seconds: float = 0.0

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, value: dict) -> "Communities":
        value = dict(value)
        value["labels"] = {int(k): v for k, v in value["labels"].items()}
        value["members"] = {int(k): v for k, v in value["members"].items()}
        value["relations"] = {int(k): [tuple(e) for e in v]
                              for k, v in value["relations"].items()}
        return cls(**value)

    @cached_property
    def index(self) -> dict[str, int]:
        """Node of each IRI; built once per loaded cache entry, not per query."""
        return {iri: n for n, iri in enumerate(self.nodes)}
