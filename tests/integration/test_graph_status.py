"""``load-status`` with ``graph``: how far each document's graph has got, on a real
broker, through the gateway and the client library, in front of the real
librarian, decoder, embeddings model, chunk and entity embedding, noun-phrase
extraction and both store owners, all in this process.

The store owners report each chunk's triples and entity vectors once stored
(stage ``graph-progress``); the status counts only what the stores hold: with
extraction not running a document is searchable and its graph "extracting" with
nothing counted, "done" once every chunk's triples and entity vectors are stored
(and then the stores do hold them), a re-load counts its own version only, and a
removed document is forgotten. Asked without ``graph``, the status is as before."""
import uuid

import pytest
import pytest_asyncio

from tests.support.waiting import eventually
from trustgraph.api import AsyncTrustGraph
from trustgraph.base import Processor
from trustgraph.embeddings import service as embeddings_service
from trustgraph.embeddings.provider import EmbeddingsSettings
from trustgraph.extract.service import SPEC as EXTRACT_SPEC
from trustgraph.extract.service import ExtractSettings
from trustgraph.gateway.app import Gateway, GatewaySettings
from trustgraph.ingest.decoder import SPEC as DECODER_SPEC
from trustgraph.ingest.decoder import DecoderSettings
from trustgraph.ingest.embedding_stages import CHUNK_SPEC, ENTITY_SPEC, EmbeddingStageSettings
from trustgraph.librarian.service import SPEC as LIBRARIAN_SPEC
from trustgraph.librarian.service import LibrarianSettings
from trustgraph.pubsub.embedded import free_port
from trustgraph.schema import LIBRARIAN_FLOW
from trustgraph.storage.triples import service as service_triples
from trustgraph.storage.vectors import service as service_vectors

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEADLINE = 90.0
SCOPE = {"user": "gina", "collection": "graph-status"}
TEXT = ("The Hanseatic League joined merchant guilds of Lübeck, Hamburg and Bergen into "
        "a trading network that spanned the Baltic and the North Sea. ") * 12


class Pipeline:
    def __init__(self, broker_url: str, data_dir) -> None:
        self.flow = f"graph-{uuid.uuid4().hex[:8]}"
        flows = {"pulsar_url": broker_url, "tg_flows": [self.flow]}
        data = {"tg_data_dir": str(data_dir)}
        self.specs = {
            "librarian": (LIBRARIAN_SPEC, LibrarianSettings(
                **flows | {"tg_flows": [LIBRARIAN_FLOW, self.flow]}, **data)),
            "decoder": (DECODER_SPEC, DecoderSettings(**flows, **data)),
            "embeddings": (embeddings_service.SPEC, EmbeddingsSettings(**flows)),
            "chunk-embeddings": (CHUNK_SPEC, EmbeddingStageSettings(**flows)),
            "entity-embeddings": (ENTITY_SPEC, EmbeddingStageSettings(**flows)),
            "extract": (EXTRACT_SPEC, ExtractSettings(**flows)),
            "triples-store": (service_triples.SPEC,
                              service_triples.TriplesStoreSettings(**flows, **data)),
            "vector-store": (service_vectors.SPEC,
                             service_vectors.VectorStoreSettings(**flows, **data)),
        }
        self.running: dict[str, Processor] = {}
        self.gateway = Gateway(GatewaySettings(
            pulsar_url=broker_url, tg_gateway_host="127.0.0.1", tg_gateway_port=free_port(),
            tg_flows=[self.flow], tg_request_timeout=30, tg_gateway_keys=False))

    async def start(self, *names: str) -> None:
        for name in names:
            self.running[name] = Processor(*self.specs[name])
            await self.running[name].start()

    async def stop(self, *names: str) -> None:
        for name in names:
            await self.running.pop(name).stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pipeline(broker, tmp_path_factory):
    pipeline = Pipeline(broker.url, tmp_path_factory.mktemp("graph-status"))
    # extract is started by the test, once it has seen the graph wait for it.
    await pipeline.start("librarian", "decoder", "embeddings", "chunk-embeddings",
                         "entity-embeddings", "triples-store", "vector-store")
    pipeline.url = await pipeline.gateway.start()
    try:
        yield pipeline
    finally:
        await pipeline.gateway.stop()
        await pipeline.stop(*reversed(pipeline.running))


@pytest_asyncio.fixture(loop_scope="module")
async def client(pipeline):
    async with AsyncTrustGraph(pipeline.url) as client:
        yield client


async def status(client, pipeline, id: str, check, what: str) -> dict:
    async def one():
        [found] = await client.load_status([id], flow=pipeline.flow, graph=True, **SCOPE)
        return found
    return await eventually(one, f"{id} {what}", accept=check, timeout=DEADLINE)


async def test_the_graph_is_done_once_every_chunk_s_triples_and_entities_are_stored(
        pipeline, client):
    await client.load_text(TEXT, "hansa.txt", title="Hanseatic League", flow=pipeline.flow,
                           **SCOPE)
    searchable = await status(client, pipeline, "hansa.txt", lambda s: s["state"] == "done",
                              "searchable")
    chunks = searchable["chunks"]
    assert chunks >= 2
    assert (searchable["graph"], searchable["triples"], searchable["entities"]) == (
        "extracting", 0, 0)  # nothing extracts on this flow yet
    [plain] = await client.load_status(["hansa.txt"], flow=pipeline.flow, **SCOPE)
    assert plain == {"id": "hansa.txt", "state": "done", "version": 1, "chunks": chunks,
                     "stored": chunks}  # not asked for the graph: as before

    await pipeline.start("extract")
    done = await status(client, pipeline, "hansa.txt", lambda s: s["graph"] == "done",
                        "with its graph")
    assert done["triples"] == done["entities"] == chunks
    # What "done" claims, the stores hold: the document's entities are searchable.
    [probe] = await client.embeddings(["Hanseatic League"], flow=pipeline.flow)
    found = await client.graph_embeddings(probe, limit=5, flow=pipeline.flow, **SCOPE)
    assert found and found[0]["label"] == "Hanseatic League"


async def test_a_reload_counts_its_own_version_and_a_removal_forgets(pipeline, client):
    if "extract" not in pipeline.running:
        await pipeline.start("extract")
    await client.load_text(TEXT, "again.txt", title="Hansa", flow=pipeline.flow, **SCOPE)
    await status(client, pipeline, "again.txt", lambda s: s.get("graph") == "done", "done")
    await client.load_text(TEXT[:400], "again.txt", title="Hansa", flow=pipeline.flow,
                           **SCOPE)
    second = await status(client, pipeline, "again.txt",
                          lambda s: s["version"] == 2 and s.get("graph") == "done",
                          "done again, as version 2")
    assert second["triples"] == second["entities"] == second["chunks"] == 1
    await client.remove_document("again.txt", **SCOPE)
    [gone] = await client.load_status(["again.txt"], flow=pipeline.flow, graph=True, **SCOPE)
    assert gone == {"id": "again.txt", "state": "unknown", "version": 0, "stored": 0}
