"""document-rag and graph-rag with every part they need running in this process, on a
real broker: config, prompt, text-completion (the openai provider → ``RagLlm``, a local
OpenAI-format server), embeddings (the real all-MiniLM-L6-v2), the chunk- and
entity-embedding stages and both stores (Qdrant Edge and SQLite, on disk).

``rag_processors`` starts them all for a test module's fixture.
"""
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.support.openai_server import OpenAiServer, Script
from tests.support.waiting import eventually
from trustgraph.base import Processor, ProcessorSettings, Requester, Timing
from trustgraph.base.stage import Emitters
from trustgraph.config.service import SPEC as CONFIG_SPEC
from trustgraph.config.service import ConfigSettings
from trustgraph.embeddings.provider import EmbeddingsSettings
from trustgraph.embeddings.service import SPEC as EMBEDDINGS
from trustgraph.ingest import embedding_stages as stages
from trustgraph.model.text_completion.openai.provider import Settings as OpenAiSettings
from trustgraph.model.text_completion.service import spec_for
from trustgraph.prompt.defaults import DEFAULT_TEMPLATES
from trustgraph.prompt.service import SPEC as PROMPT_SPEC
from trustgraph.prompt.service import PromptSettings
from trustgraph.pubsub import Bus
from trustgraph.retrieval.document_rag import service as document_rag
from trustgraph.retrieval.graph_rag import service as graph_rag
from trustgraph.schema import (
    Chunk,
    DocumentEmbeddingsRequest,
    DocumentEmbeddingsResponse,
    DocumentRef,
    EmbeddingsRequest,
    EmbeddingsResponse,
    RagResponse,
    Record,
    decode,
)
from trustgraph.storage.triples import service as service_triples
from trustgraph.storage.vectors import service as service_vectors

REWRITE = "where and when Acme Rockets was founded"
SUBQUERIES = ["Who founded Acme Rockets?", "Where is the Roadrunner engine built?"]


class RagLlm(OpenAiServer):
    """Answers the query-rewrite and query-decompose prompts as a model would (they
    are told apart by their system prompts); every other prompt as scripted."""

    answers = {DEFAULT_TEMPLATES["query-rewrite"].system: json.dumps({"query": REWRITE}),
               DEFAULT_TEMPLATES["query-decompose"].system: json.dumps(SUBQUERIES)}

    async def handle(self, request, body=None):
        body = await request.json()
        text = self.prompt_text(body)
        for system, answer in self.answers.items():
            if system in text:
                if not self.wants_stream(body):
                    return self.completion(answer, self.script)
                response = await self.open_stream(request, body)
                await self.write_token(response, answer)
                await self.write_end(response, body, self.script)
                return response
        return await super().handle(request, body)

    def answer_prompt(self) -> str:
        """The last prompt that was answered as scripted: the RAG answer's."""
        return self.prompt_text(self.last_body)


class RagProcessors:
    """Every processor both RAG services need, started in this process on a flow of
    their own."""

    def __init__(self, broker, llm: RagLlm, data_dir: Path,
                 retrieval: dict[str, Any] | None = None) -> None:
        """``retrieval``: build the RAG services with their retrieval settings, as
        ``tg-run`` does, these given (``{"tg_retrieval": "hybrid", "tg_graph_mix":
        True}``: tg-run's defaults), rather than with plain ProcessorSettings."""
        self.url, self.llm, self.data_dir = broker.url, llm, data_dir
        self.retrieval = retrieval
        self.flow = f"rag-{uuid.uuid4().hex[:8]}"
        self.processors: list[Processor] = []
        self.bus = Bus(self.url)
        self.emit = Emitters(self.bus, self.flow).emit

    async def start(self) -> "RagProcessors":
        common = {"pulsar_url": self.url, "tg_flows": [self.flow], "tg_request_timeout": 30}
        stored = {"tg_data_dir": str(self.data_dir), "neo4j_uri": None, "qdrant_url": None}
        for processor in (
                Processor(CONFIG_SPEC, ConfigSettings(pulsar_url=self.url,
                                                tg_data_dir=str(self.data_dir))),
                Processor(spec_for("openai"), OpenAiSettings(
                    openai_base_url=self.llm.base_url, openai_api_key="test", **common)),
                Processor(PROMPT_SPEC, PromptSettings(**common)),
                Processor(EMBEDDINGS, EmbeddingsSettings(tg_embeddings="minilm", **common)),
                Processor(service_vectors.SPEC,
                          service_vectors.VectorStoreSettings(**common, **stored)),
                Processor(service_triples.SPEC,
                          service_triples.TriplesStoreSettings(**common, **stored)),
                Processor(stages.CHUNK_SPEC, stages.EmbeddingStageSettings(**common)),
                Processor(stages.ENTITY_SPEC, stages.EmbeddingStageSettings(**common)),
                Processor(document_rag.SPEC, self._settings(document_rag.RetrievalSettings,
                                                            common)),
                Processor(graph_rag.SPEC, self._settings(graph_rag.GraphRagSettings,
                                                         common))):
            self.processors.append(processor)
            await processor.start()
        return self

    def _settings(self, kind: type[ProcessorSettings], common: dict[str, Any]
                  ) -> ProcessorSettings:
        if self.retrieval is None:
            return ProcessorSettings(**common)
        return kind(**common, **{key: value for key, value in self.retrieval.items()
                                 if key in kind.model_fields})

    async def stop(self) -> None:
        await self.bus.close()
        for processor in reversed(self.processors):
            await processor.stop()

    async def requester(self, service: str) -> Requester:
        requester = Requester(self.bus, service, self.flow, f"test-{uuid.uuid4().hex[:8]}",
                              timing=Timing(timeout=30))
        await requester.start()
        return requester

    async def frames(self, service: str, request: Record) -> list[RagResponse]:
        """Every record of the answer, errors included, in order."""
        requester = await self.requester(service)
        return [decode(RagResponse, data) async for batch in requester.frames(request)
                for data, _ in batch]

    async def vector(self, text: str) -> list[float]:
        embeddings = await self.requester("embeddings")
        return (await embeddings.call(EmbeddingsRequest(texts=[text]),
                                      EmbeddingsResponse)).vectors[0]

    async def load_chunks(self, user: str, collection: str,
                          documents: dict[tuple[str, str], list[str]]) -> None:
        """``{(document id, title): [chunk text]}`` in at the ``chunks`` stage; returns
        once the vector store serves them all."""
        count = 0
        for (id, title), texts in documents.items():
            document = DocumentRef(id=id, user=user, collection=collection, title=title)
            for index, text in enumerate(texts):
                await self.emit("chunks", Chunk(document=document, id=f"{id}/c{index}",
                                                index=index, text=text))
                count += 1
        store, probe = await self.requester("document-embeddings"), await self.vector("x")
        search = DocumentEmbeddingsRequest(vector=probe, limit=1000, user=user,
                                           collection=collection)
        await eventually(lambda: store.call(search, DocumentEmbeddingsResponse),
                         f"{count} chunks stored in {user}/{collection}",
                         accept=lambda found: len(found.chunks) >= count, timeout=60)


@asynccontextmanager
async def rag_processors(broker, data_dir: Path) -> AsyncIterator[RagProcessors]:
    """``RagProcessors`` on ``data_dir``, their LLM scripted to answer in 12 tokens."""
    llm = await RagLlm(Script(tokens=12)).start()
    try:
        processors = await RagProcessors(broker, llm, data_dir).start()
        try:
            yield processors
        finally:
            await processors.stop()
    finally:
        await llm.stop()
