"""What the ingestion pipeline embeds for a corpus, and the embedder's raw rate on
exactly those texts (bench.ingestion's reference).

The texts are made here with the pipeline's own code at its default settings: the
decoder's chunks, each embedded under its document title as chunk-embeddings
embeds it (``embedded_text``), and the entities the default extractor (noun phrases)
sends on for a vector, as ``"label: definition"`` (``entity_text``). Entities are
counted two ways:

* ``mentions``: one text per entity per chunk, as entity-embeddings embedded them
  when each record was embedded on its own (an entity named in 30 chunks, 30 times);
* ``entities``: each entity once per collection, with the richest text seen (its
  definition when one chunk gave one), as a stage that remembers what it embedded
  needs.

The raw rate of a set is the model as the embeddings service runs it (its batcher,
runs and threads as configured by default) embedding the whole set as one bulk
request (runs padded the least).
"""
import asyncio
import time
from dataclasses import dataclass, field

from trustgraph.chunking.context import embedded_text
from trustgraph.decoding import PLAIN
from trustgraph.embeddings.minilm.provider import make
from trustgraph.embeddings.provider import EmbeddingsSettings
from trustgraph.extract.service import ExtractSettings
from trustgraph.ingest.decoder import DecoderSettings, chunk_records, token_counter
from trustgraph.ingest.embedding_stages import entity_text
from trustgraph.schema import Chunk, DocumentMetadata


@dataclass
class Texts:
    chunks: list[str] = field(default_factory=list)  # as chunk-embeddings embeds them
    mentions: list[str] = field(default_factory=list)  # an entity per chunk naming it
    entities: list[str] = field(default_factory=list)  # an entity once per collection
    extract_seconds: float = 0.0  # CPU of the extractor here, on every chunk


def pipeline_texts(docs: list[tuple[str, str]]) -> Texts:
    """The texts the pipeline embeds for ``docs`` ((id, text); each loaded with its id
    as title)."""
    from trustgraph.extract.nounphrase import NounPhraseExtractor  # spaCy: only here
    decoder, extract = DecoderSettings(), ExtractSettings()
    counter = token_counter(decoder.tg_chunk_tokenizer)
    extractor = NounPhraseExtractor(extract.tg_noun_phrases, extract.tg_noun_phrases_embedded)
    texts, richest = Texts(), {}
    try:
        for id, text in docs:
            for chunk in chunk_records(DocumentMetadata(id=id, kind=PLAIN, title=id),
                                       text.encode(), PLAIN, decoder.tg_chunk_size,
                                       decoder.tg_chunk_overlap, counter):
                texts.chunks.append(embedded_text(chunk.text, chunk.headings, id))
                texts.extract_seconds += _mentions(extractor, chunk, texts, richest)
    finally:
        extractor.close()
    texts.entities = list(richest.values())
    return texts


def _mentions(extractor, chunk: Chunk, texts: Texts, richest: dict[str, str]) -> float:
    """Adds the chunk's entity texts; returns the CPU seconds the extractor took."""
    started = time.process_time()
    records = extractor.graph(chunk).records()
    spent = time.process_time() - started
    for entity in (records[1].entities if records else []):
        if not entity.label.strip():
            continue
        text = entity_text(entity.label, entity.definition)
        texts.mentions.append(text)
        key = entity.entity.model_dump_json()
        if key not in richest or (entity.definition.strip() and ":" not in richest[key]):
            richest[key] = text
    return spent


class Raw:
    """The model as the embeddings service runs it, timed on each set of texts."""

    SETS = ("chunks", "mentions", "entities")

    def __init__(self, texts: Texts) -> None:
        self.texts = texts
        self.embedder = make(EmbeddingsSettings())
        self.measure_set(texts.chunks[:8])  # warm up
        self.seconds: dict[str, list[float]] = {name: [] for name in self.SETS}
        self.cpu: dict[str, list[float]] = {name: [] for name in self.SETS}

    def measure(self) -> None:
        for name in self.SETS:
            started, cpu = time.perf_counter(), time.process_time()  # every thread's
            self.measure_set(getattr(self.texts, name))
            self.seconds[name].append(time.perf_counter() - started)
            self.cpu[name].append(time.process_time() - cpu)

    def measure_set(self, texts: list[str]) -> None:
        async def embed() -> None:
            try:  # a pipeline's work is bulk (where the code has lanes)
                from trustgraph.base import BULK, set_lane
                set_lane(BULK)
            except ImportError:
                pass
            await self.embedder.batcher.embed(texts)
        asyncio.run(embed())

    def best(self, name: str) -> float:
        return min(self.seconds[name])

    def chunk_rates(self, *entity_sets: str) -> list[float]:
        """Chunks/s of the model embedding the chunks and the entity sets named, per
        round."""
        names = ("chunks", *entity_sets)
        return [len(self.texts.chunks) / sum(self.seconds[name][n] for name in names)
                for n in range(len(self.seconds["chunks"]))]
