"""The processors behind the gateway's ingestion and query rows, started in this
process on a real broker for an integration module: ``IngestStack`` (librarian, both
store owners, a stand-in embeddings service and a gateway, on a flow of their own).

The stand-in embeddings service gives a text a fixed pseudo-random unit vector seeded
by the text (``vector_of``), so a query for the same text finds it with score 1.
"""
import asyncio
import hashlib
import math
import random
import uuid

from tests.support.waiting import serving
from trustgraph.base import Context, Processor, ProcessorSettings, ProcessorSpec, Service
from trustgraph.base.stage import Emitters
from trustgraph.gateway.app import Gateway, GatewaySettings
from trustgraph.librarian.service import SPEC as LIBRARIAN_SPEC
from trustgraph.librarian.service import LibrarianSettings
from trustgraph.pubsub import Bus
from trustgraph.pubsub.embedded import free_port
from trustgraph.schema import (
    LIBRARIAN_FLOW,
    DocumentEmbeddingsRequest,
    DocumentEmbeddingsResponse,
    EmbeddingsRequest,
    EmbeddingsResponse,
    LibrarianRequest,
    LibrarianResponse,
    TriplesQueryRequest,
    TriplesQueryResponse,
)
from trustgraph.storage.triples import service as service_triples
from trustgraph.storage.vectors import service as service_vectors

DEADLINE = 30.0
DIM = 16


def vector_of(text: str) -> list[float]:
    rng = random.Random(hashlib.sha256(text.encode()).digest())
    v = [rng.uniform(-1, 1) for _ in range(DIM)]
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


async def embed(request: EmbeddingsRequest, ctx: Context) -> EmbeddingsResponse:
    return EmbeddingsResponse(vectors=[vector_of(t) for t in request.inputs()],
                              end_of_stream=True)


EMBEDDINGS_SPEC = ProcessorSpec("test-embeddings", ProcessorSettings, lambda s: [
    Service("embeddings", EmbeddingsRequest, EmbeddingsResponse, embed)])


class IngestStack:
    """Librarian, triples and vector store owners, the stand-in embeddings service and
    a gateway routing one flow of their own (plus ``extra`` processors, and
    ``other_flows`` that the gateway routes and nothing here serves); ``emit`` sends to
    the flow's stage topics."""

    def __init__(self, broker, data_dir, extra=(), other_flows=(),
                 request_timeout: float = 15) -> None:
        self.broker, self.data_dir, self.extra = broker, data_dir, extra
        self.flow = f"ingest-{uuid.uuid4().hex[:8]}"
        self.started: list[Processor] = []
        self.bus = Bus(broker.url)
        self.emit = Emitters(self.bus, self.flow).emit
        self.gateway = Gateway(GatewaySettings(
            pulsar_url=broker.url, tg_gateway_host="127.0.0.1", tg_gateway_port=free_port(),
            tg_flows=[self.flow, *other_flows], tg_request_timeout=request_timeout,
            tg_gateway_keys=False))
        self.url = ""

    async def start(self) -> "IngestStack":
        url, flows = self.broker.url, [self.flow]
        # The librarian is outside flows: asked on LIBRARIAN_FLOW whatever flow is named.
        processors = [
            Processor(LIBRARIAN_SPEC, LibrarianSettings(
                pulsar_url=url, tg_data_dir=str(self.data_dir / "library"),
                tg_flows=[LIBRARIAN_FLOW, self.flow], lazy_rag_enabled=False)),
            # The store owners also on the flow of the services outside flows:
            # collection-management's delete asks them there (LazyRAG is not here).
            Processor(service_triples.SPEC, service_triples.TriplesStoreSettings(
                pulsar_url=url, tg_flows=[LIBRARIAN_FLOW, self.flow],
                tg_data_dir=str(self.data_dir / "triples"))),
            Processor(service_vectors.SPEC, service_vectors.VectorStoreSettings(
                pulsar_url=url, tg_flows=[LIBRARIAN_FLOW, self.flow],
                tg_data_dir=str(self.data_dir / "vectors"))),
            Processor(EMBEDDINGS_SPEC, ProcessorSettings(pulsar_url=url, tg_flows=flows)),
            *(Processor(spec, settings(pulsar_url=url, tg_flows=flows))
              for spec, settings in self.extra),
        ]
        for processor in processors:
            self.started.append(processor)
            await processor.start()
        for service, flow, probe, model in (
                ("librarian", LIBRARIAN_FLOW, LibrarianRequest(operation="list-documents"),
                 LibrarianResponse),
                ("triples", self.flow, TriplesQueryRequest(), TriplesQueryResponse),
                ("document-embeddings", self.flow, DocumentEmbeddingsRequest(vector=[1.0]),
                 DocumentEmbeddingsResponse),
                ("embeddings", self.flow, EmbeddingsRequest(texts=[]), EmbeddingsResponse)):
            await serving(self.bus, service, flow, probe, model)
        self.url = await self.gateway.start()
        return self

    async def stop(self) -> None:
        await self.gateway.stop()
        await self.bus.close()
        for processor in reversed(self.started):
            await processor.stop()


async def ask(ws, service: str, request: dict, flow: str) -> dict:
    """One request on the raw socket; its single, complete frame."""
    id = uuid.uuid4().hex[:8]
    await ws.send_json({"id": id, "service": service, "flow": flow, "request": request})
    async with asyncio.timeout(DEADLINE):
        frame = await ws.receive_json()
    assert frame["id"] == id and frame["complete"], frame
    return frame
