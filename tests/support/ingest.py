"""For end-to-end ingestion tests: a corpus of real prose, what the pipeline must
store for it, a view of the stage topics, and what the stores hold.

``expected`` works the answer out here, in the test process, with the pipeline's own
pure parts (the decoder's chunker, the default LLM-free extractor) at their default
settings: the chunks each document becomes, the triples each chunk yields with
their provenance, and the entities that get vectors. A test then proves that the
stores, filled through the broker by separate processes, hold exactly that.
"""
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.waiting import eventually
from trustgraph.extract.service import ExtractSettings
from trustgraph.ingest.decoder import DecoderSettings, chunk_records, token_counter
from trustgraph.pubsub import Bus
from trustgraph.schema import (
    Chunk,
    ChunkEntities,
    ChunkTriples,
    ChunkVector,
    DocumentMetadata,
    EntityVectors,
    Triple,
    flow_topic,
)

Provenance = tuple[Triple, str, str]  # (triple, document id, chunk id)


def prose(count: int, sizes: tuple[int, ...] = (700, 1600, 2600, 1100)) -> list[str]:
    """``count`` distinct passages of English prose (the Python language reference
    that ships with Python), cut at paragraph ends, of about ``sizes`` characters in
    turn; Latin-1 only, so each can also be written into a PDF's text layer."""
    import pydoc_data.topics
    topics = pydoc_data.topics.topics
    paragraphs = [p.strip() for key in sorted(topics) for p in topics[key].split("\n\n")
                  if len(p.strip()) > 40]
    texts, current = [], ""
    for paragraph in paragraphs:
        current += paragraph.encode("latin-1", "replace").decode("latin-1") + "\n\n"
        if len(current) >= sizes[len(texts) % len(sizes)]:
            texts.append(current)
            current = ""
            if len(texts) == count:
                return texts
    raise ValueError(f"the reference makes only {len(texts)} passages of these sizes")


@dataclass
class Expected:
    chunks: dict[str, Chunk] = field(default_factory=dict)  # by chunk id
    provenance: set[Provenance] = field(default_factory=set)
    entities: set[str] = field(default_factory=set)  # IRIs that get an entity vector
    per_document: Counter = field(default_factory=Counter)  # chunks of each document

    @property
    def triples(self) -> set[Triple]:
        return {triple for triple, _, _ in self.provenance}


def expected(documents: list[tuple[DocumentMetadata, bytes]]) -> Expected:
    """What the pipeline stores for ``documents`` (metadata with the kind the
    librarian gives it, and content)."""
    from trustgraph.extract.nounphrase import NounPhraseExtractor  # spaCy: only here
    decoder, extract = DecoderSettings(), ExtractSettings()
    counter = token_counter(decoder.tg_chunk_tokenizer)
    extractor = NounPhraseExtractor(extract.tg_noun_phrases,  # the default extractor
                                    extract.tg_noun_phrases_embedded)
    result = Expected()
    try:
        for document, content in documents:
            for chunk in chunk_records(document, content, document.kind,
                                       decoder.tg_chunk_size, decoder.tg_chunk_overlap,
                                       counter):
                result.chunks[chunk.id] = chunk
                result.per_document[document.id] += 1
                if records := extractor.graph(chunk).records():
                    triples, entities = records
                    result.provenance |= {(t, document.id, chunk.id) for t in triples.triples}
                    result.entities |= {e.entity.i for e in entities.entities
                                        if e.label.strip()}
    finally:
        extractor.close()
    return result


class StageWatch:
    """Every record on a flow's stage topics, read on subscriptions of its own."""

    STAGES = {"chunks": Chunk, "chunk-vectors": ChunkVector, "triples": ChunkTriples,
              "entities": ChunkEntities, "entity-vectors": EntityVectors}

    def __init__(self, broker_url: str, flow: str = "default") -> None:
        self.bus, self.flow = Bus(broker_url), flow
        self.seen: dict[str, list] = {stage: [] for stage in self.STAGES}

    async def start(self) -> "StageWatch":
        for stage, model in self.STAGES.items():
            consumer = await self.bus.subscribe(flow_topic(stage, self.flow), "test-watch")
            self.bus.receive(consumer, self._handler(stage, model, consumer))
        return self

    def _handler(self, stage, model, consumer):
        async def handle(message):
            self.seen[stage].append(model.model_validate_json(message.data()))
            await consumer.acknowledge(message)
        return handle

    def count(self, stage: str) -> int:
        return len(self.seen[stage])

    async def close(self) -> None:
        await self.bus.close()


def stored_provenance(data_dir: Path, user: str, collection: str) -> list[Provenance]:
    """Every (triple, document, chunk) row of the SQLite triples store of a scope,
    read straight from its file (read-only, beside the running store)."""
    from trustgraph.storage.triples.store import make_triple
    path = Path(data_dir) / "triples.sqlite"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT t.s, t.p, t.o, t.o_iri, p.document, p.chunk FROM provenance p "
            "JOIN triples t ON t.id = p.triple JOIN scopes s ON s.id = t.scope "
            "WHERE s.user = ? AND s.collection = ?", (user, collection)).fetchall()
    return [(make_triple(s, p, o, bool(o_iri)), document, chunk)
            for s, p, o, o_iri, document, chunk in rows]


async def check_graph_stored(client, want: Expected, data_dir: Path, user: str,
                             collection: str, probe: list[float], deadline: float) -> None:
    """Extraction runs beside chunk embedding: wait until the triples store holds every
    (triple, document, chunk) row of ``want``, then check each is there once, the
    triples query repeats nothing, and every entity has its vector."""
    await eventually(lambda: set(stored_provenance(data_dir, user, collection))
                     == want.provenance, "every triple with its provenance", timeout=deadline)
    rows = stored_provenance(data_dir, user, collection)
    assert len(rows) == len(set(rows)) == len(want.provenance)
    scope = {"user": user, "collection": collection}
    triples = [Triple.model_validate(t) for t in await client.triples(limit=100_000, **scope)]
    assert len(triples) == len(set(triples)) and set(triples) == want.triples

    async def entities():
        found = await client.graph_embeddings(probe, limit=1000, **scope)
        return found if {e["entity"]["i"] for e in found} == want.entities else None
    found = await eventually(entities, "a vector for every entity", timeout=deadline)
    assert len(found) == len(want.entities)
