"""The librarian over a real pulsar-lite broker: loads answered once durable with the
decode work on its persistent topic, library operations, document removal announced
on ``document-removed``, and a librarian dying between storing and sending."""
import asyncio
import base64
import uuid

import pytest

from tests.support.librarian import LibrarianClient
from tests.support.topic import Topic
from trustgraph.base import Processor, ProcessorSpec, RequestTimeout, ServiceError
from trustgraph.librarian.collection_store import CollectionStore
from trustgraph.librarian.collections import Collections
from trustgraph.librarian.service import SPEC as LIBRARIAN_SPEC
from trustgraph.librarian.service import LibrarianSettings, Library, library_services
from trustgraph.librarian.store import LibraryStore
from trustgraph.schema import DecodeWork, DocumentRemoved


@pytest.fixture
def flow():
    return f"lib-{uuid.uuid4().hex[:8]}"


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
    return await LibrarianClient(bus, flow).start()


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
    # Work is sent before the load is answered, so any work for a refused load would
    # be on the topic before the work of a load sent after them.
    await client.load_text(id="after", text="A load after the refused ones.")
    seen = await decode_topic.wait(2)
    assert [w.document.id for w in seen] == ["p", "after"]  # no work for any refused load


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
    await client.librarian(operation="add-document", document_id="notes", user="alice",
                           collection="b", content=content)
    collections = await client.librarian(operation="list-collections", user="alice")
    assert [(c.collection, c.documents) for c in collections.collections] == [("b", 1),
                                                                              ("c", 1)]
    assert (await client.librarian(operation="list-collections", user="carol")
            ).collections == []
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
        Library(store, dies_before_sending), Collections(CollectionStore(store), []))),
        settings)
    await start(dying)
    client = await LibrarianClient(bus, flow, timeout=2.0).start()
    await client.ready()
    with pytest.raises(RequestTimeout):  # never answered: the client knows to retry
        await client.load_text(id="doc", text="Important words.")
    assert stuck.is_set()
    assert store.read("trustgraph", "default", "doc")[1] == b"Important words."
    await dying.stop()
    assert decode_topic.seen == []

    await start()  # the restarted librarian; the client sends again
    client = await LibrarianClient(bus, flow).start()
    await client.ready()
    await client.load_text(id="doc", text="Important words.")
    [work] = await decode_topic.wait(1)
    assert work.document.id == "doc"
    # Any second work for "doc" (the first librarian's request, handled again) would
    # be on the topic before the work of a load sent after it.
    await client.load_text(id="after", text="A load after it.")
    seen = await decode_topic.wait(2)
    assert [w.document.id for w in seen] == ["doc", "after"]  # "doc" was sent once
