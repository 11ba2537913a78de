"""The front of ingestion over a real pulsar-lite broker: text-load / document-load →
librarian → ``decode`` → decoder → one ``Chunk`` per chunk on ``chunks``; text,
Markdown and PDF; re-loads giving the same chunks; documents that can never be
decoded rejected with a clear log line; a large document as many small records."""
import base64
import logging
import re
import uuid

import pytest

from tests.support.librarian import LibrarianClient
from tests.support.pdf import minimal_pdf
from tests.support.topic import Topic
from tests.support.waiting import eventually, signalled
from trustgraph.base import Processor, ProcessorSpec
from trustgraph.base.stage import Emitters
from trustgraph.decoding import decode
from trustgraph.ingest.decoder import DecoderSettings, chunk_records, decoder_parts, token_counter
from trustgraph.librarian.service import SPEC as LIBRARIAN_SPEC
from trustgraph.librarian.service import LibrarianSettings
from trustgraph.librarian.store import LibraryStore
from trustgraph.schema import Chunk, DecodeWork, DocumentMetadata, DocumentRef, encode
from trustgraph.schema.librarian import UPLOAD_PART_BYTES

SIZE, OVERLAP = 40, 5


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


TEXT = "\n\n".join(
    f"Paragraph {p}. " + " ".join(f"The quick brown fox number {p}-{s} jumps over the lazy "
                                  f"dog near river {s}." for s in range(6))
    for p in range(5))

MARKDOWN = """# Getting started

Install the **platform** with [pip](https://pypi.org) and run `tg-start`.

## Loading documents

* Text files become chunks.
* PDF files keep their _page_ numbers.

| Format | Decoder |
|--------|---------|
| Markdown | regex |
"""

PDF_PAGES = [["Page one talks about graphs.", "Graphs have nodes and edges (links).",
              *(f"Line {i} of page one names entity E{i} and relation R{i}." for i in range(8))],
             ["Page two talks about vectors.", "Vectors live in a Qdrant shard.",
              *(f"Line {i} of page two holds vector V{i} of chunk C{i}." for i in range(8))]]


@pytest.fixture
def flow():
    return f"dec-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def stack(broker, tmp_path, flow, bus):
    """A librarian and a decoder on one data dir, a client, and the chunks topic. The
    decoder takes one document at a time, in the order their work was sent, so the
    chunks of a document come after every chunk of the documents loaded before it."""
    chunks = await Topic.watch(bus, "chunks", flow, Chunk)
    librarian = Processor(LIBRARIAN_SPEC, LibrarianSettings(
        pulsar_url=broker.url, tg_data_dir=str(tmp_path), tg_flows=[flow]))
    settings = DecoderSettings(pulsar_url=broker.url, tg_data_dir=str(tmp_path),
                               tg_flows=[flow], tg_chunk_size=SIZE, tg_chunk_overlap=OVERLAP,
                               tg_concurrency=1)
    decoder = Processor(ProcessorSpec("decoder", DecoderSettings, decoder_parts), settings)
    await librarian.start()
    await decoder.start()
    client = await LibrarianClient(bus, flow).start()
    await client.ready()
    yield client, chunks
    await decoder.stop()
    await librarian.stop()


def expected(tmp_path, id, user="trustgraph", collection="default"):
    document, content = LibraryStore(tmp_path).read(user, collection, id)
    return chunk_records(document, content, document.kind, SIZE, OVERLAP,
                         token_counter("minilm"))


async def chunks_of(topic, id, count, timeout=15.0):
    def found():
        chunks = [c for c in topic.seen if c.document.id == id]
        return chunks if len(chunks) >= count else None
    chunks = await signalled(topic.arrived, found, f"{count} chunks of {id!r}",
                             timeout=timeout)
    return sorted(chunks, key=lambda c: c.index)


def check_chunks(chunks, id, source_words, title=""):
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert [c.id for c in chunks] == [f"{id}/c{i}" for i in range(len(chunks))]
    assert all(c.document.title == title for c in chunks)
    covered = set(words(" ".join(c.text for c in chunks)))
    assert set(source_words) <= covered, set(source_words) - covered


async def test_text_markdown_and_pdf_become_chunks_covering_their_text(stack, tmp_path):
    client, topic = stack
    await client.load_text(id="text", title="Foxes", text=TEXT)
    await client.load_document(id="md", title="guide.md",
                               data=base64.b64encode(MARKDOWN.encode()).decode())
    pdf = minimal_pdf(PDF_PAGES)
    assert decode(pdf, "application/pdf").text  # the hand-made PDF reads back
    await client.load_document(id="pdf", kind="application/pdf",
                               data=base64.b64encode(pdf).decode())

    text_chunks = await chunks_of(topic, "text", len(expected(tmp_path, "text")))
    assert len(text_chunks) > 5  # 40 tokens each: many chunks
    check_chunks(text_chunks, "text", words(TEXT), "Foxes")
    assert [c.text for c in text_chunks] == [c.text for c in expected(tmp_path, "text")]

    md_chunks = await chunks_of(topic, "md", len(expected(tmp_path, "md")))
    md_text = " ".join(c.text for c in md_chunks)
    check_chunks(md_chunks, "md", ["getting", "started", "install", "platform", "pip",
                                   "tg", "start", "pdf", "page", "numbers", "markdown",
                                   "regex"], "guide.md")
    for markup in ("**", "](", "# ", "|---", "`", "_page_"):
        assert markup not in md_text

    pdf_chunks = await chunks_of(topic, "pdf", len(expected(tmp_path, "pdf")))
    check_chunks(pdf_chunks, "pdf", words(" ".join(sum(PDF_PAGES, []))))
    assert pdf_chunks[0].page == 1 and pdf_chunks[-1].page == 2
    assert any("graphs" in c.text and c.page == 1 for c in pdf_chunks)
    assert any("V7" in c.text and c.page == 2 for c in pdf_chunks)


async def test_loading_again_sends_the_same_chunks(stack, tmp_path):
    client, topic = stack
    await client.load_text(id="again", text=TEXT)
    count = len(expected(tmp_path, "again"))
    first = await chunks_of(topic, "again", count)
    await client.load_text(id="again", text=TEXT)
    # Sent again (a store upserts by chunk id), and exactly the same chunks.
    both = await chunks_of(topic, "again", 2 * count)
    assert sorted(c.id for c in both) == sorted(2 * [c.id for c in first])
    assert {(c.id, c.index, c.text) for c in both} == {(c.id, c.index, c.text) for c in first}
    # A document loaded after both: its chunks come after any further chunk of "again".
    await client.load_text(id="after", text="A short document loaded after the others.")
    await chunks_of(topic, "after", 1)
    assert len([c for c in topic.seen if c.document.id == "again"]) == 2 * count


async def test_documents_that_cannot_be_decoded_are_rejected_and_the_stage_goes_on(
        stack, tmp_path, bus, flow, caplog):
    client, topic = stack
    store = LibraryStore(tmp_path)
    # Stored behind the librarian's checks, as a bad file or an old version could be.
    store.put(DocumentMetadata(id="zip", kind="application/zip"), b"PK\x03\x04 zip bytes")
    store.put(DocumentMetadata(id="broken", kind="application/pdf"), b"%PDF-1.4 nothing else")
    store.put(DocumentMetadata(id="scan", kind="application/pdf"), minimal_pdf([[]]))
    emit = Emitters(bus, flow).emit
    with caplog.at_level(logging.WARNING):
        for id, kind in (("zip", "application/zip"), ("broken", "application/pdf"),
                         ("scan", "application/pdf"), ("removed", "text/plain")):
            await emit("decode", DecodeWork(document=DocumentRef(id=id), kind=kind))
        await client.load_text(id="fine", text="After the bad ones, a good one.")
        await chunks_of(topic, "fine", 1)
        await eventually(lambda: len([r for r in caplog.records
                                      if "rejected" in r.getMessage()]) >= 4,
                         "four rejections logged", timeout=10)
    rejections = "\n".join(r.getMessage() for r in caplog.records
                           if "rejected" in r.getMessage())
    assert "document 'zip' of trustgraph/default (application/zip) cannot be decoded: " \
           "cannot decode documents of type 'application/zip'" in rejections
    assert "document 'broken' of trustgraph/default (application/pdf) cannot be decoded: " \
           "not a readable PDF" in rejections
    assert "no text layer" in rejections
    assert "document 'removed' of trustgraph/default is not in the library" in rejections
    assert {c.document.id for c in topic.seen} == {"fine"}


async def test_a_large_document_becomes_many_small_records(stack, tmp_path):
    client, topic = stack
    text = "\n\n".join(f"Section {i}: " + " ".join(f"word{i}x{j}" for j in range(60))
                       for i in range(300))  # ~250 KB
    await client.load_text(id="big", text=text)
    count = len(expected(tmp_path, "big"))
    assert count > 300
    chunks = await chunks_of(topic, "big", count, timeout=60)
    assert max(len(encode(c)) for c in chunks) < 2000
    assert [c.text for c in chunks] == [c.text for c in expected(tmp_path, "big")]
    assert "word299x59" in chunks[-1].text


async def test_a_pdf_larger_than_a_broker_message_is_uploaded_in_parts(stack, tmp_path):
    client, topic = stack
    pdf = minimal_pdf(PDF_PAGES, padding=6 * 1024 * 1024)
    begun = await client.librarian(operation="begin-upload", document_id="large.pdf",
                                   title="Large", size=len(pdf))
    parts = [pdf[i:i + UPLOAD_PART_BYTES] for i in range(0, len(pdf), UPLOAD_PART_BYTES)]
    assert len(parts) == 4
    for index, part in enumerate(parts):
        await client.librarian(operation="upload-part", upload_id=begun.upload_id,
                               part=index, content=base64.b64encode(part).decode())
    done = await client.librarian(operation="complete-upload", upload_id=begun.upload_id)
    assert (done.document.kind, done.document.size) == ("application/pdf", len(pdf))
    await client.librarian(operation="add-processing", document_id="large.pdf")
    chunks = await chunks_of(topic, "large.pdf", len(expected(tmp_path, "large.pdf")))
    check_chunks(chunks, "large.pdf", words(" ".join(sum(PDF_PAGES, []))), "Large")


def test_chunk_settings_are_checked():
    with pytest.raises(ValueError, match="TG_CHUNK_OVERLAP \\(30\\) must be at most half"):
        DecoderSettings(tg_chunk_size=50, tg_chunk_overlap=30)
    assert DecoderSettings(tg_chunk_size=50, tg_chunk_overlap=25).tg_chunk_size == 50
