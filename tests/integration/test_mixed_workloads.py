"""Questions stay fast while documents load (DESIGN §9), on a real broker with the
real embeddings service and model (all-MiniLM-L6-v2) and the real chunk embedding
stage. A bulk request's run of the model is held (an event, in the model's own
thread): the service's bulk work is saturated, and the chunk stage's requests queue
behind it (one in the model's queue, one for a concurrency slot) for as long as a
test says.

* a question's embedding is answered while that backlog waits: it has a concurrency
  slot and a model run that bulk work never takes;
* the stage's deliveries are not failed by the requester's timeout however long
  they wait in the saturated service (their keep-alives say ``queued``), and each
  chunk is handled once: nothing is redelivered or embedded twice."""
import asyncio
import threading
import uuid

import numpy as np
import pytest

from tests.support.handled import Handled
from tests.support.waiting import eventually, signalled
from trustgraph.base import (
    BULK,
    Processor,
    ProcessorSettings,
    ProcessorSpec,
    Requester,
    Service,
    Stage,
    Timing,
    delivery,
    set_lane,
)
from trustgraph.base.stage import Emitters
from trustgraph.embeddings.minilm.batcher import Batcher
from trustgraph.embeddings.minilm.provider import MiniLmEmbedder, make
from trustgraph.embeddings.provider import EmbeddingsSettings
from trustgraph.embeddings.service import embeddings_handler
from trustgraph.ingest import embedding_stages as stages
from trustgraph.pubsub import Bus
from trustgraph.schema import (
    Chunk,
    ChunkVector,
    DocumentRef,
    EmbeddingsRequest,
    EmbeddingsResponse,
)

HELD = "Held: a long run of the model"  # the held bulk request's text
TIMEOUT = 1.0  # TG_REQUEST_TIMEOUT of the stage's requests
TIMING = Timing(keep_alive=0.25)  # liveness: 5 missed keep-alives, 1.25 s
CHUNKS = 6


class HeldModel:
    """The real model, except that a run with the ``HELD`` text waits for
    ``release`` (in the model's thread, as a long run would)."""

    def __init__(self, embedder: MiniLmEmbedder) -> None:
        self.embed = embedder.model.embed
        self.release = threading.Event()
        self.held = threading.Event()  # a run of the load has started

    def __call__(self, texts: list[str]) -> np.ndarray:
        if HELD in texts:
            self.held.set()
            assert self.release.wait(60), "the load's run was never released"
        return self.embed(texts)


@pytest.fixture(scope="module")
def embedder():
    return make(EmbeddingsSettings())


class Stack:
    """The embeddings service (3 slots, 1 of them interactive work's; one model run
    at a time for bulk work, one more for a question), chunk embedding, and a
    collector of chunk vectors."""

    def __init__(self, broker, embedder: MiniLmEmbedder) -> None:
        self.broker, self.flow = broker, f"mixed-{uuid.uuid4().hex[:8]}"
        self.model = HeldModel(embedder)
        embedder = MiniLmEmbedder(embedder.model)
        embedder.batcher = Batcher(self.model, 1, length=embedder.model.count_tokens, runs=1)
        self.embedder = embedder
        self.handled = Handled()
        self.vectors: list[ChunkVector] = []
        self.deliveries: list[int] = []
        self.processors: list[Processor] = []
        self.served = 0  # requests the embeddings handler took (each had a slot)
        self.serving = asyncio.Event()

    async def start(self) -> "Stack":
        base = {"pulsar_url": self.broker.url, "tg_flows": [self.flow]}
        embed = embeddings_handler(self.embedder, 256)

        async def counted(request, ctx):
            self.served += 1
            self.serving.set()
            return await embed(request, ctx)
        service = Service("embeddings", EmbeddingsRequest, EmbeddingsResponse, counted)
        await self._run(ProcessorSpec("embeddings", EmbeddingsSettings, lambda r: [service]),
                        EmbeddingsSettings(**base, tg_concurrency=3, tg_interactive_slots=1))
        chunks = stages.CHUNK_SPEC
        await self._run(ProcessorSpec(chunks.name, chunks.settings,
                                      self.handled.wrap(self._counted(chunks.services)),
                                      chunks.uses),
                        stages.EmbeddingStageSettings(**base, tg_request_timeout=TIMEOUT))

        async def collect(record: ChunkVector, ctx) -> None:
            self.vectors.append(record)
        await self._run(ProcessorSpec("collector", ProcessorSettings, lambda r: [
            Stage("chunk-vectors", ChunkVector, collect)]), ProcessorSettings(**base))
        self.bus = Bus(self.broker.url)
        self.emit = Emitters(self.bus, self.flow).emit
        self.asker = Requester(self.bus, "embeddings", self.flow, uuid.uuid4().hex[:8],
                               timing=Timing(timeout=60))
        await self.asker.start()
        return self

    def _counted(self, factory):
        """The stage's handler, noting the delivery each record came in."""
        def parts(runtime):
            [stage] = factory(runtime)

            async def handler(record, ctx):
                self.deliveries.append(delivery())
                await stage.handler(record, ctx)
            return [Stage(stage.name, stage.record, handler, stage.subscription)]
        return parts

    async def _run(self, spec, settings) -> None:
        processor = Processor(spec, settings, timing=TIMING)
        await processor.start()
        self.processors.append(processor)

    async def saturate(self) -> None:
        """A bulk request held in the model, then the stage's requests behind it: one
        in a slot, waiting for the model; one waiting for a slot."""
        async def held() -> None:
            set_lane(BULK)  # as a stage's request
            await self.asker.call(EmbeddingsRequest(texts=[HELD]), EmbeddingsResponse)
        self.held = asyncio.ensure_future(held())
        await eventually(self.model.held.is_set, "the held run in the model")
        document = DocumentRef(id="load", title="Load", version=1)
        for i in range(CHUNKS):
            await self.emit("chunks", Chunk(document=document, id=f"load/c{i}", index=i,
                                            text=f"Chunk {i} of a load that waits."))
        await signalled(self.serving, lambda: self.served >= 2,
                        "the stage's first request in the service")

    async def stop(self) -> None:
        self.model.release.set()
        await self.held
        await self.bus.close()
        for processor in reversed(self.processors):
            await processor.stop()


@pytest.fixture
async def stack(broker, embedder):
    stack = await Stack(broker, embedder).start()
    yield stack
    await stack.stop()


async def test_a_question_is_embedded_while_a_bulk_backlog_waits(stack):
    await stack.saturate()
    question = "Which bird is a cockatoo?"
    answer = await stack.asker.call(EmbeddingsRequest(texts=[question]), EmbeddingsResponse)
    assert stack.vectors == [] and not stack.model.release.is_set()  # the load still waits
    expected = stack.model.embed([question])[0]
    assert np.allclose(answer.vectors[0], expected, atol=1e-6)
    stack.model.release.set()
    await stack.handled.until("chunks", CHUNKS, timeout=60)


async def test_a_delivery_waiting_in_a_saturated_service_is_not_failed_by_a_timeout(stack):
    await stack.saturate()
    # Held for three times the stage's request timeout: long enough that a request
    # the service did not say was queued would have failed. (No event marks a timeout
    # that did not fire: the time itself is what must pass.)
    await asyncio.sleep(3 * TIMEOUT)
    assert stack.handled.counts["chunks:raised"] == 0 and stack.vectors == []
    stack.model.release.set()
    await stack.handled.until("chunks", CHUNKS, timeout=60)
    assert stack.handled.counts["chunks:raised"] == 0
    assert stack.deliveries == [1] * CHUNKS  # each chunk handled once, never redelivered
    # the vectors reach the collector through their own topic, after the stage is done
    await eventually(lambda: len(stack.vectors) >= CHUNKS, "every chunk vector collected")
    assert sorted(v.chunk.id for v in stack.vectors) == [f"load/c{i}" for i in range(CHUNKS)]
