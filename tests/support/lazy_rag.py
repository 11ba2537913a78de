"""LazyRAG's retrieval over the real stores, in this process: a SQLite triples store
and Qdrant Edge entity vectors, served by the store processors' own handlers, with a
bag-of-words embedder standing in for the model (the same words give near vectors).
Used by tests/unit/test_lazy_rag*.py."""
import hashlib
import math
import re
from pathlib import Path

from trustgraph.base import Context
from trustgraph.extract.vocabulary import LABEL, entity_iri, relation_iri
from trustgraph.schema import EmbeddingsResponse, Term, Triple, encode
from trustgraph.storage.triples.service import edges_handler, subgraph_handler, version_handler
from trustgraph.storage.triples.sqlite import SqliteTriplesStore
from trustgraph.storage.vectors.qdrant_edge import EdgeBackend
from trustgraph.storage.vectors.service import graph_handler
from trustgraph.storage.vectors.store import EntityVector, VectorStore

DIMENSION = 256
Fact = tuple[str, str, str]  # subject, predicate, object ('"…"' for a literal value)


def embed(text: str) -> list[float]:
    vector = [0.0] * DIMENSION
    for word in re.findall(r"\w+", text.lower()):
        vector[int(hashlib.sha1(word.encode()).hexdigest(), 16) % DIMENSION] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def triples_of(facts: list[Fact]) -> tuple[list[Triple], dict[str, str]]:
    """The triples LLM extraction writes for ``facts`` (labels included), and the
    entities they name (IRI → label)."""
    triples: dict[Triple, None] = {}
    entities: dict[str, str] = {}

    def named(name: str, iri: str) -> Term:
        triples.setdefault(Triple(s=Term.iri(iri), p=Term.iri(LABEL), o=Term.literal(name)))
        return Term.iri(iri)

    for s, p, o in facts:
        subject = named(s, entity_iri(s))
        entities[subject.i] = s
        if o.startswith('"'):
            obj = Term.literal(o.strip('"'))
        else:
            obj = named(o, entity_iri(o))
            entities[obj.i] = o
        triples.setdefault(Triple(s=subject, p=named(p, relation_iri(p)), o=obj))
    return list(triples), entities


class _Handler:
    def __init__(self, handler) -> None:
        self._handler = handler
        self.requests: list = []

    async def call(self, request, model):
        self.requests.append(request)
        return await self._handler(request, Context(id="t", flow="default", clients=None))

    async def frames(self, request, request_id=None):
        """A streaming handler's records as the bus carries them: (JSON, final)."""
        self.requests.append(request)
        async for record in self._handler(request, Context(id="t", flow="default",
                                                           clients=None)):
            yield [(encode(record), record.is_final())]


class _Embeddings:
    async def call(self, request, model):
        return EmbeddingsResponse(vectors=[embed(text) for text in request.texts])


class Stores:
    """The real stores, and ``clients`` giving LazyRAG what it calls."""

    def __init__(self, triples: SqliteTriplesStore, vectors: VectorStore) -> None:
        self.triples, self.vectors = triples, vectors
        self.services = {
            "embeddings": _Embeddings(),
            "graph-embeddings": _Handler(graph_handler(vectors)),
            "subgraph": _Handler(subgraph_handler(triples)),
            "graph-version": _Handler(version_handler(triples)),
            "graph-edges": _Handler(edges_handler(triples)),
        }

    @classmethod
    async def open(cls, directory: Path) -> "Stores":
        return cls(await SqliteTriplesStore.open(directory / "triples.sqlite"),
                   VectorStore(EdgeBackend(directory / "vectors")))

    async def get(self, service: str):
        return self.services[service]

    async def load(self, user: str, collection: str, document: str,
                   facts: list[Fact]) -> None:
        triples, entities = triples_of(facts)
        await self.triples.add(user, collection, triples, document=document,
                               chunk=f"{document}/c0")
        await self.vectors.upsert_entities(user, collection, [
            EntityVector(entity=Term.iri(iri), vector=embed(label), label=label,
                         document=document) for iri, label in entities.items()])

    async def close(self) -> None:
        await self.triples.close()
        await self.vectors.close()
