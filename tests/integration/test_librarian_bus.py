"""The librarian over a real pulsar-lite broker: loads answered once durable with the
decode work on its persistent topic, library operations, document removal announced
on ``document-removed``, and a librarian dying between storing and sending."""
import asyncio
import base64
import uuid

import pytest

from trustgraph.base import (Processor, ProcessorSpec, Requester, RequestTimeout,
                             ServiceError)
from trustgraph.librarian.service import SPEC as LIBRARIAN_SPEC
from trustgraph.librarian.service import Library, LibrarianSettings, library_services
from trustgraph.librarian.store import LibraryStore
from trustgraph.pubsub import Bus
from trustgraph.schema import (DecodeWork, DocumentLoadRequest, DocumentRemoved,
                               LibrarianRequest, LibrarianResponse, LoadResponse,
                               TextLoadRequest, decode, flow_topic)


@pytest.fixture
def flow():
    return f"lib-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def bus(broker):
    bus = Bus(broker.url)
    yield bus
    await bus.close()


class Topic:
    """Everything that arrives on a stage topic of a flow, acknowledged."""

    def __init__(self, record):
        self.record = record
        self.seen = []
        self.arrived = asyncio.Event()

    @classmethod
    async def watch(cls, bus, stage, flow, record):
        topic = cls(record)
        consumer = await bus.subscribe(flow_topic(stage, flow), f"test-{uuid.uuid4().hex[:6]}")

        async def handle(message):
            topic.seen.append(decode(record, message.data()))
            topic.arrived.set()
            await consumer.acknowledge(message)

        bus.receive(consumer, handle)
        return topic

    async def wait(self, count, timeout=10.0):
        async with asyncio.timeout(timeout):
            while len(self.seen) < count:
                self.arrived.clear()
                await self.arrived.wait()
        return self.seen


class Client:
    def __init__(self, bus, flow, timeout=10.0):
        owner = f"test-{uuid.uuid4().hex[:8]}"
        self.requesters = {name: Requester(bus, name, flow, owner, timeout)
                           for name in ("librarian", "text-load", "document-load")}

    async def start(self):
        for requester in self.requesters.values():
            await requester.start()
        return self

    async def load_text(self, **fields):
        return await self.requesters["text-load"].call(TextLoadRequest(**fields), LoadResponse)

    async def load_document(self, **fields):
        return await self.requesters["document-load"].call(DocumentLoadRequest(**fields),
                                                           LoadResponse)

    async def librarian(self, **fields):
        return await self.requesters["librarian"].call(LibrarianRequest(**fields),
                                                       LibrarianResponse)

    async def ready(self, timeout=10.0):
        """Every service answers. The broker drops a request that arrives in the moment
        between a consumer subscribing and its permits reaching the broker, so each
        first request is retried."""
        probes = {"librarian": lambda: self.librarian(operation="list-documents"),
                  "text-load": lambda: self.load_text(id="", text="x"),
                  "document-load": lambda: self.load_document(id="", data="")}
        async with asyncio.timeout(timeout):
            for probe in probes.values():
                while True:
                    try:
                        async with asyncio.timeout(1.0):
                            await probe()
                    except ServiceError as error:
                        if error.error.type == "bad-request":
                            break
                    except TimeoutError:
                        continue
                    else:
                        break


@pytest.fixture
async def start(broker, tmp_path, flow):
    """Starts librarian processors on one data dir; all are stopped at the end."""
    started = []

    async def start(processor=None):
        processor = processor or Processor(LIBRARIAN_SPEC, LibrarianSettings(
            pulsar_url=broker.url, tg_data_dir=str(tmp_path), tg_flows=[flow]))
        started.append(processor)
        await processor.start()
        return processor

    yield start
    for processor in started:
        await processor.stop()


@pytest.fixture
async def client(bus, flow):
    return await Client(bus, flow).start()


async def test_text_load_is_answered_once_stored_and_its_decode_work_follows(
        start, client, bus, flow, tmp_path):
    decode_topic = await Topic.watch(bus, "decode", flow, DecodeWork)
    await start()
    await client.ready()
    answer = await client.load_text(id="doc-1", user="alice", collection="papers",
                                    title="Notes", text="The cat sat on the mat.")
    assert answer.error is None and answer.end_of_stream
    # Answered: so the document is on disk, whoever looks.
    document, content = LibraryStore(tmp_path).read("alice", "papers", "doc-1")
    assert (content, document.title, document.kind) == (
        b"The cat sat on the mat.", "Notes", "text/plain")
    [work] = await decode_topic.wait(1)
    assert (work.document.id, work.document.user, work.document.collection,
            work.document.title, work.kind) == ("doc-1", "alice", "papers", "Notes",
                                                "text/plain")


async def test_document_load_and_its_errors(start, client, bus, flow, tmp_path):
    decode_topic = await Topic.watch(bus, "decode", flow, DecodeWork)
    await start()
    await client.ready()
    pdf = b"%PDF-1.4\n% not a full PDF: only the librarian's header check sees it\n"
    await client.load_document(id="p", data=base64.b64encode(pdf).decode())
    [work] = await decode_topic.wait(1)
    assert work.kind == "application/pdf"

    with pytest.raises(ServiceError, match="bad-request: data is not valid base64"):
        await client.load_document(id="x", data="@@@")
    with pytest.raises(ServiceError, match="bad-request: cannot process documents of type"):
        await client.load_document(id="x", kind="image/png",
                                   data=base64.b64encode(b"\x89PNG").decode())
    huge = base64.b64encode(b"x" * (3 * 1024 * 1024 + 1)).decode()
    with pytest.raises(ServiceError, match="too-large: document 'x' is 3145729 bytes"):
        await client.load_document(id="x", data=huge)
    await asyncio.sleep(0.3)
    assert len(decode_topic.seen) == 1  # no work for any refused load


async def test_library_operations_and_tenancy(start, client, bus, flow):
    decode_topic = await Topic.watch(bus, "decode", flow, DecodeWork)
    removed_topic = await Topic.watch(bus, "document-removed", flow, DocumentRemoved)
    await start()
    await client.ready()
    content = base64.b64encode(b"# Title\n\nBody text.").decode()
    for user in ("alice", "bob"):  # the same id for two tenants
        added = await client.librarian(operation="add-document", document_id="report",
                                       user=user, collection="c", title=f"{user}'s",
                                       content=content, tags=["q3"])
        assert (added.document.kind, added.document.size) == ("text/markdown", 19)
    listing = await client.librarian(operation="list-documents", user="alice",
                                     collection="c")
    assert [(d.id, d.title) for d in listing.documents] == [("report", "alice's")]
    nobody = await client.librarian(operation="list-documents", user="alice",
                                    collection="other")
    assert nobody.documents == []
    got = await client.librarian(operation="get-document-content", document_id="report",
                                 user="bob", collection="c")
    assert got.document.title == "bob's" and base64.b64decode(got.content) == \
        b"# Title\n\nBody text."

    processing = await client.librarian(operation="add-processing", document_id="report",
                                        user="alice", collection="c")
    assert processing.processing.flow == flow
    [work] = await decode_topic.wait(1)
    assert (work.document.id, work.document.user, work.kind) == ("report", "alice",
                                                                 "text/markdown")

    removed = await client.librarian(operation="remove-document", document_id="report",
                                     user="alice", collection="c")
    assert removed.document.title == "alice's"
    [gone] = await removed_topic.wait(1)
    assert (gone.document.id, gone.document.user, gone.document.collection) == (
        "report", "alice", "c")
    with pytest.raises(ServiceError, match="not-found"):
        await client.librarian(operation="get-document-metadata", document_id="report",
                               user="alice", collection="c")
    still = await client.librarian(operation="get-document-metadata", document_id="report",
                                   user="bob", collection="c")
    assert still.document.title == "bob's"


async def test_a_librarian_dying_between_store_and_send_loses_nothing(
        start, broker, bus, flow, tmp_path):
    decode_topic = await Topic.watch(bus, "decode", flow, DecodeWork)
    stuck = asyncio.Event()

    async def dies_before_sending(flow, stage, record):
        stuck.set()
        await asyncio.Event().wait()  # the process "dies" here

    settings = LibrarianSettings(pulsar_url=broker.url, tg_data_dir=str(tmp_path),
                                 tg_flows=[flow])
    store = LibraryStore(tmp_path)
    dying = Processor(ProcessorSpec("librarian", LibrarianSettings, lambda s: library_services(
        Library(store, dies_before_sending))), settings)
    await start(dying)
    client = await Client(bus, flow, timeout=2.0).start()
    await client.ready()
    with pytest.raises(RequestTimeout):  # never answered: the client knows to retry
        await client.load_text(id="doc", text="Important words.")
    assert stuck.is_set()
    assert store.read("trustgraph", "default", "doc")[1] == b"Important words."
    await dying.stop()
    assert decode_topic.seen == []

    await start()  # the restarted librarian; the client sends again
    client = await Client(bus, flow).start()
    await client.ready()
    await client.load_text(id="doc", text="Important words.")
    [work] = await decode_topic.wait(1)
    assert work.document.id == "doc"
    await asyncio.sleep(0.3)
    assert len(decode_topic.seen) == 1
