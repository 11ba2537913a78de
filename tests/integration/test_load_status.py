"""``load-status`` through the gateway and the client library, on a real broker, in
front of the real librarian, decoder, embeddings model (all-MiniLM-L6-v2), chunk
embedding and Qdrant Edge vector store, all in this process.

It proves that the status is never ahead of what is durable: a document whose
chunks cannot be embedded (chunk-embeddings not running) stays "embedding" with
nothing stored however long the decoder has been done, and is "done" only once the
vector store holds every chunk of *that* version (a re-load does not inherit the
chunks of the version before, and one with fewer chunks leaves none of the old
ones behind). Unreadable documents fail with the decoder's reason;
ids never loaded, or loaded by another tenant, are "unknown". The library's new
columns are added to a library made before them.
"""
import asyncio
import sqlite3
import sys
import uuid
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.pdf import minimal_pdf
from tests.support.waiting import eventually
from trustgraph.api import AsyncTrustGraph
from trustgraph.base import Processor
from trustgraph.decoding import PLAIN
from trustgraph.embeddings import service as embeddings_service
from trustgraph.embeddings.provider import EmbeddingsSettings
from trustgraph.gateway.app import Gateway, GatewaySettings
from trustgraph.ingest.decoder import SPEC as DECODER_SPEC
from trustgraph.ingest.decoder import DecoderSettings, chunk_records, token_counter
from trustgraph.ingest.embedding_stages import CHUNK_SPEC, EmbeddingStageSettings
from trustgraph.librarian.service import SPEC as LIBRARIAN_SPEC
from trustgraph.librarian.service import LibrarianSettings
from trustgraph.librarian.store import LibraryStore
from trustgraph.pubsub.embedded import free_port
from trustgraph.schema import LIBRARIAN_FLOW, DocumentMetadata
from trustgraph.storage.vectors import service as service_vectors

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEADLINE = 60.0
SCOPE = {"user": "carol", "collection": "status"}
SENTENCE = ("The Hanseatic League joined merchant guilds of Lübeck, Hamburg and Bergen "
            "into a trading network that spanned the Baltic and the North Sea. ")


def expected_chunks(text: str) -> int:
    """How many chunks the decoder makes of ``text`` (its own code, default settings)."""
    settings = DecoderSettings()
    return len(chunk_records(DocumentMetadata(id="x"), text.encode(), PLAIN,
                             settings.tg_chunk_size, settings.tg_chunk_overlap,
                             token_counter(settings.tg_chunk_tokenizer)))


class Pipeline:
    """The processors of one flow of their own, started and stopped one by one."""

    def __init__(self, broker_url: str, data_dir) -> None:
        self.broker_url, self.data_dir = broker_url, str(data_dir)
        self.flow = f"status-{uuid.uuid4().hex[:8]}"
        self.running: dict[str, Processor] = {}
        self.gateway = Gateway(GatewaySettings(
            pulsar_url=broker_url, tg_gateway_host="127.0.0.1", tg_gateway_port=free_port(),
            tg_flows=[self.flow], tg_request_timeout=30, tg_gateway_keys=False))

    def _processor(self, name: str) -> Processor:
        flows = {"pulsar_url": self.broker_url, "tg_flows": [self.flow]}
        data = {"tg_data_dir": self.data_dir}
        match name:
            case "librarian":
                return Processor(LIBRARIAN_SPEC, LibrarianSettings(
                    **flows | {"tg_flows": [LIBRARIAN_FLOW, self.flow]}, **data))
            case "decoder":
                return Processor(DECODER_SPEC, DecoderSettings(**flows, **data))
            case "embeddings":
                return Processor(embeddings_service.SPEC, EmbeddingsSettings(**flows))
            case "chunk-embeddings":
                return Processor(CHUNK_SPEC, EmbeddingStageSettings(**flows))
            case "vector-store":
                return Processor(service_vectors.SPEC,
                                 service_vectors.VectorStoreSettings(**flows, **data))
        raise AssertionError(name)

    async def start(self, *names: str) -> None:
        for name in names:
            self.running[name] = self._processor(name)
            await self.running[name].start()

    async def stop(self, *names: str) -> None:
        for name in names:
            await self.running.pop(name).stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pipeline(broker, tmp_path_factory):
    pipeline = Pipeline(broker.url, tmp_path_factory.mktemp("status"))
    # chunk-embeddings is started by the tests that want chunks stored.
    await pipeline.start("librarian", "decoder", "embeddings", "vector-store")
    pipeline.gateway_url = await pipeline.gateway.start()
    try:
        yield pipeline
    finally:
        await pipeline.gateway.stop()
        await pipeline.stop(*reversed(pipeline.running))


@pytest_asyncio.fixture(loop_scope="module")
async def client(pipeline):
    async with AsyncTrustGraph(pipeline.gateway_url) as client:
        yield client


async def status_when(client, pipeline, id: str, check, what: str, scope=SCOPE) -> dict:
    """Poll load-status (with a deadline) until ``check(status)`` holds."""
    async def status():
        [status] = await client.load_status([id], flow=pipeline.flow, **scope)
        return status
    return await eventually(status, f"{id} to be {what}", accept=check, timeout=DEADLINE)


async def test_a_document_is_done_only_when_its_chunks_are_stored(pipeline, client):
    text = SENTENCE * 30
    chunks = expected_chunks(text)
    assert chunks >= 3  # a document of several chunks
    await client.load_text(text, "hansa.txt", flow=pipeline.flow, **SCOPE)
    # Decoded, but nothing embeds chunks yet: "embedding", none stored.
    status = await status_when(client, pipeline, "hansa.txt",
                               lambda s: s["state"] != "decoding", "decoded")
    assert status == {"id": "hansa.txt", "state": "embedding", "version": 1,
                      "chunks": chunks, "stored": 0}

    await pipeline.start("chunk-embeddings")
    try:
        status = await status_when(client, pipeline, "hansa.txt",
                                   lambda s: s["state"] == "done", "done")
    finally:
        await pipeline.stop("chunk-embeddings")
    assert status == {"id": "hansa.txt", "state": "done", "version": 1, "chunks": chunks,
                      "stored": chunks}
    # What "done" claims is what the vector store serves.
    [probe] = await client.embeddings([SENTENCE], flow=pipeline.flow)
    found = await client.document_embeddings(probe, limit=100, flow=pipeline.flow, **SCOPE)
    assert sorted(c["chunk_id"] for c in found) == sorted(
        f"hansa.txt/c{i}" for i in range(chunks))


async def test_a_reload_counts_only_its_own_chunks(pipeline, client):
    first, second = SENTENCE * 12, SENTENCE * 20
    await pipeline.start("chunk-embeddings")
    try:
        await client.load_text(first, "reload.txt", flow=pipeline.flow, **SCOPE)
        await status_when(client, pipeline, "reload.txt",
                          lambda s: s["state"] == "done", "done")
    finally:
        await pipeline.stop("chunk-embeddings")
    # Stored again: the first version's vectors are all there, and do not count.
    await client.load_text(second, "reload.txt", flow=pipeline.flow, **SCOPE)
    status = await status_when(client, pipeline, "reload.txt",
                               lambda s: s["state"] != "decoding", "decoded")
    assert status == {"id": "reload.txt", "state": "embedding", "version": 2,
                      "chunks": expected_chunks(second), "stored": 0}
    await pipeline.start("chunk-embeddings")
    try:
        status = await status_when(client, pipeline, "reload.txt",
                                   lambda s: s["state"] == "done", "done")
    finally:
        await pipeline.stop("chunk-embeddings")
    assert status["stored"] == status["chunks"] == expected_chunks(second)


async def test_a_reload_with_fewer_chunks_leaves_no_stale_tail(pipeline, client):
    longer, shorter = SENTENCE * 30, SENTENCE * 8
    assert expected_chunks(shorter) < expected_chunks(longer)
    [probe] = await client.embeddings([SENTENCE], flow=pipeline.flow)

    async def stored_ids() -> list[str]:
        found = await client.document_embeddings(probe, limit=100, flow=pipeline.flow,
                                                 **SCOPE)
        return sorted(c["chunk_id"] for c in found if c["document_id"] == "shrinks.txt")

    await pipeline.start("chunk-embeddings")
    try:
        for text in (longer, shorter):
            await client.load_text(text, "shrinks.txt", flow=pipeline.flow, **SCOPE)
            await status_when(client, pipeline, "shrinks.txt",
                              lambda s: s["state"] == "done", "done")
            want = sorted(f"shrinks.txt/c{i}" for i in range(expected_chunks(text)))
            await eventually(stored_ids, f"the vectors of {want}",
                             accept=lambda ids, want=want: ids == want, timeout=DEADLINE)
    finally:
        await pipeline.stop("chunk-embeddings")
    found = await client.document_embeddings(probe, limit=100, flow=pipeline.flow, **SCOPE)
    assert {c["text"] for c in found if c["document_id"] == "shrinks.txt"} <= set(
        c.text for c in chunk_records(DocumentMetadata(id="shrinks.txt"), shorter.encode(),
                                      PLAIN, DecoderSettings().tg_chunk_size,
                                      DecoderSettings().tg_chunk_overlap,
                                      token_counter("minilm")))


async def test_an_unreadable_document_fails_with_the_reason(pipeline, client):
    await client.load_document(minimal_pdf([[]]), "scan.pdf", kind="application/pdf",
                               flow=pipeline.flow, **SCOPE)
    status = await status_when(client, pipeline, "scan.pdf",
                               lambda s: s["state"] != "decoding", "decoded")
    assert status["state"] == "failed" and status["version"] == 1
    assert "the PDF has no text layer" in status["error"]


async def test_unknown_ids_and_other_tenants_are_unknown(pipeline, client):
    await client.load_text("A short note about tides.", "note.txt", flow=pipeline.flow,
                           **SCOPE)
    await status_when(client, pipeline, "note.txt", lambda s: s["state"] != "decoding",
                      "decoded")
    statuses = await client.load_status(["never-loaded", "note.txt"], flow=pipeline.flow,
                                        **SCOPE)
    assert [s["state"] for s in statuses] == ["unknown", "embedding"]
    for scope in ({"user": "mallory", "collection": "status"},
                  {"user": "carol", "collection": "other"}):
        [status] = await client.load_status(["note.txt"], flow=pipeline.flow, **scope)
        assert status == {"id": "note.txt", "state": "unknown", "version": 0, "stored": 0}


async def test_removing_a_document_forgets_its_status(pipeline, client):
    await client.load_text("Tides follow the moon.", "gone.txt", flow=pipeline.flow, **SCOPE)
    await status_when(client, pipeline, "gone.txt", lambda s: s["state"] != "decoding",
                      "decoded")
    await client.remove_document("gone.txt", **SCOPE)
    [status] = await client.load_status(["gone.txt"], flow=pipeline.flow, **SCOPE)
    assert status["state"] == "unknown"


async def test_wait_gives_up_on_documents_that_make_no_progress(pipeline, tmp_path):
    """tg-load-text --wait, with nothing embedding chunks on the flow."""
    (tmp_path / "stuck.txt").write_text(SENTENCE * 6)
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("tg-load-text")), "-u", pipeline.gateway_url,
        "-f", pipeline.flow, "-U", SCOPE["user"], "-C", SCOPE["collection"], "--wait",
        "--wait-timeout", "1", str(tmp_path / "stuck.txt"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), DEADLINE)
    assert process.returncode == 1
    assert out.decode().startswith("loaded 0 files (0 B), 0 chunks stored, in ")
    assert err.decode() == (f"tg-load-text: {tmp_path / 'stuck.txt'}: no progress for 1 s "
                            f"(0 of {expected_chunks(SENTENCE * 6)} chunks stored)\n")


async def test_a_library_made_before_versions_gets_them(tmp_path):
    library = tmp_path / "library"
    library.mkdir()
    with sqlite3.connect(library / "library.db") as db:  # the first release's tables
        db.executescript("""
            CREATE TABLE document (user TEXT NOT NULL, collection TEXT NOT NULL,
                id TEXT NOT NULL, title TEXT NOT NULL, kind TEXT NOT NULL,
                comments TEXT NOT NULL, tags TEXT NOT NULL, size INTEGER NOT NULL,
                sha256 TEXT NOT NULL, time INTEGER NOT NULL,
                PRIMARY KEY (user, collection, id));
            CREATE TABLE processing (user TEXT NOT NULL, collection TEXT NOT NULL,
                document_id TEXT NOT NULL, flow TEXT NOT NULL, time INTEGER NOT NULL,
                PRIMARY KEY (user, collection, document_id, flow));
            INSERT INTO document VALUES ('u', 'c', 'old', '', 'text/plain', '', '[]', 0,
                                         '', 0);
            INSERT INTO processing VALUES ('u', 'c', 'old', 'default', 0);""")
    store = LibraryStore(tmp_path)
    assert store.get("u", "c", "old").version == 0
    assert store.load_status("u", "c", ["old"], "default")["old"].chunks is None
    stored = store.put(DocumentMetadata(id="old", user="u", collection="c"), b"new", "default")
    assert stored.version == 1 == store.get("u", "c", "old").version
    assert store.put(DocumentMetadata(id="old", user="u", collection="c"), b"x").version == 2
    # The decoder's record for a version older than the one being processed is ignored.
    assert not store.record_chunks("u", "c", "old", "default", 0, chunks=5)
    assert store.record_chunks("u", "c", "old", "default", 1, chunks=5)
    LibraryStore(tmp_path)  # opening it again changes nothing
    assert store.load_status("u", "c", ["old"], "default")["old"].chunks == 5
