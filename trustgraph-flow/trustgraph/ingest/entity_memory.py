"""The entity vectors an entity-embeddings process has made, per (user, collection):
an entity named in many chunks is embedded once per collection, not once per
mention. (On 20 documents of the Python reference, the default extractor named
1,673 entities for 174 chunks, 772 of them distinct: more than half of the entity
texts were embedded again for nothing.)

An entity's vector is made from its richest text seen: a later mention with a
definition, where the remembered one had none, is embedded anew and replaces it;
any other mention reuses it, so every chunk naming the entity sends the same
vector (the vector store keeps one point per entity, listing the documents that
mention it, so each mention is still sent and stored).

Bounded (least recently used entities are forgotten first), and kept for one
embeddings model: when the service answers with another model, everything
remembered is forgotten, since a collection never mixes models (the vector store
refuses them). Vectors are held as float32 and given back rounded to the wire's 7
decimals: the numbers the local model's service sent, exactly (another provider's,
to float32's precision).
"""
from collections import OrderedDict

import numpy as np

from trustgraph.schema import EntityContext, Term

DECIMALS = 7  # as the embeddings service sends them (minilm/provider.py)


class EntityMemory:
    def __init__(self, size: int) -> None:
        self.size = max(0, size)
        self.model: str | None = None  # of every vector held
        self._vectors: OrderedDict[tuple[str, str, Term], tuple[np.ndarray, bool]] \
            = OrderedDict()

    def __len__(self) -> int:
        return len(self._vectors)

    def recall(self, user: str, collection: str, entity: EntityContext
               ) -> list[float] | None:
        """Its vector, when one was made in this scope from a text as rich as this
        mention's; None: embed it."""
        key = (user, collection, entity.entity)
        held = self._vectors.get(key)
        if held is None:
            return None
        vector, defined = held
        if entity.definition.strip() and not defined:
            return None  # a richer text than the one remembered
        self._vectors.move_to_end(key)
        return vector.astype(np.float64).round(DECIMALS).tolist()

    def remember(self, user: str, collection: str, entity: EntityContext,
                 vector: list[float], model: str) -> None:
        if model != self.model:
            self._vectors.clear()  # another model's vectors: never sent beside these
            self.model = model
        if not self.size:
            return
        key = (user, collection, entity.entity)
        self._vectors[key] = (np.asarray(vector, dtype=np.float32),
                              bool(entity.definition.strip()))
        self._vectors.move_to_end(key)
        while len(self._vectors) > self.size:
            self._vectors.popitem(last=False)
