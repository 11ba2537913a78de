"""The librarian's operations over a real store with a recording ``emit``: what is
stored, what is sent where and in which order, and the errors for bad input."""
import base64

import pytest

import trustgraph.librarian.service as service
from trustgraph.base import Context, HandledError, Items
from trustgraph.librarian.service import Library
from trustgraph.librarian.store import LibraryStore, NotFound
from trustgraph.schema import (
    DecodeWork,
    DocumentLoadRequest,
    DocumentRemoved,
    LibrarianRequest,
    LoadResponse,
    TextLoadRequest,
)

PDF_HEAD = b"%PDF-1.4\n"


class Emitted:
    """A recording emit; ``check(flow, stage, record)`` runs first and may raise."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, object]] = []
        self.check = None

    async def __call__(self, flow, stage, record):
        if self.check is not None:
            self.check(flow, stage, record)
        self.sent.append((flow, stage, record))


@pytest.fixture
def store(tmp_path):
    return LibraryStore(tmp_path)


@pytest.fixture
def emitted():
    return Emitted()


@pytest.fixture
def library(store, emitted):
    return Library(store, emitted, max_bytes=1000)


def ctx(flow="default"):
    return Context(id="req-1", flow=flow, clients=None)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def ask(library, flow="default", **fields):
    records = [r async for r in Items(library.librarian(LibrarianRequest(**fields), ctx(flow)))]
    assert records[-1].end_of_stream and all(not r.end_of_stream for r in records[:-1])
    return records


async def test_text_load_stores_then_sends_decode_work_then_answers(library, store, emitted):
    # When the work is sent, the document is already stored (and durably: put fsyncs).
    emitted.check = lambda flow, stage, record: store.read("u", "c", "doc")
    answer = await library.text_load(TextLoadRequest(id="doc", user="u", collection="c",
                                                     title="T", text="Hello there."),
                                     ctx("f1"))
    assert answer == LoadResponse() and answer.end_of_stream
    [(flow, stage, work)] = emitted.sent
    assert (flow, stage) == ("f1", "decode") and isinstance(work, DecodeWork)
    assert (work.document.id, work.document.user, work.document.collection,
            work.document.title, work.kind) == ("doc", "u", "c", "T", "text/plain")
    assert store.read("u", "c", "doc")[1] == b"Hello there."
    assert [p.flow for p in store.processing("u", "c", "doc")] == ["f1"]


async def test_a_load_whose_work_was_not_sent_is_not_answered_and_a_retry_finishes_it(
        library, store, emitted):
    def broker_gone(flow, stage, record):
        raise ConnectionError("broker gone")

    emitted.check = broker_gone
    request = TextLoadRequest(id="doc", text="Some text.")
    with pytest.raises(ConnectionError):
        await library.text_load(request, ctx())
    assert emitted.sent == []
    emitted.check = None
    await library.text_load(request, ctx())  # the client's retry: same document, sent now
    assert [(f, s, r.document.id) for f, s, r in emitted.sent] == [("default", "decode", "doc")]
    assert len(store.documents("trustgraph", "default")) == 1


async def test_text_load_recognises_markdown(library, emitted):
    await library.text_load(TextLoadRequest(id="a", title="notes.md", text="plain words"),
                            ctx())
    await library.text_load(TextLoadRequest(id="b", text="# Title\n\nBody."), ctx())
    await library.text_load(TextLoadRequest(id="c", text="no markup here"), ctx())
    await library.text_load(TextLoadRequest(id="d", text="%PDF-1.4 looks like a pdf"), ctx())
    assert [r.kind for _, _, r in emitted.sent] == [
        "text/markdown", "text/markdown", "text/plain", "text/plain"]


async def test_document_load_kinds_and_bad_input(library, emitted):
    await library.document_load(DocumentLoadRequest(id="p", data=b64(PDF_HEAD + b"x")), ctx())
    await library.document_load(DocumentLoadRequest(id="m", title="README.md",
                                                    data=b64(b"words")), ctx())
    await library.document_load(DocumentLoadRequest(id="t", kind="text/plain; charset=utf-8",
                                                    data=b64(b"words")), ctx())
    assert [r.kind for _, _, r in emitted.sent] == [
        "application/pdf", "text/markdown", "text/plain; charset=utf-8"]

    cases = [
        (dict(id="x", data="not base64!"), "bad-request", "data is not valid base64"),
        (dict(id="x", data=""), "bad-request", "data is empty"),
        (dict(id="x", data=b64(b"x" * 1001)), "too-large", "1001 bytes, over the limit of 1000"),
        (dict(id="x", data="A" * 2000), "too-large", "over the limit of 1000"),
        (dict(id="x", data=b64(b"<html/>"), kind="text/html"), "bad-request",
         "cannot process documents of type 'text/html'"),
        (dict(id="x", data=b64(b"PK\x03\x04"), kind="application/zip"), "bad-request",
         "supported: text/plain"),
        (dict(id="x", data=b64(b"just text"), kind="application/pdf"), "bad-request",
         "not a PDF"),
        (dict(id="", data=b64(b"x")), "bad-request", "id is required"),
        (dict(id="x" * 1025, data=b64(b"x")), "bad-request", "over 1024"),
        (dict(id="x", user="", data=b64(b"x")), "bad-request", "must not be empty"),
    ]
    for fields, type, message in cases:
        with pytest.raises(HandledError) as failure:
            await library.document_load(DocumentLoadRequest(**fields), ctx())
        assert failure.value.type == type and message in failure.value.message, fields
    assert len(emitted.sent) == 3  # nothing was sent for any of them


async def test_text_load_limits(library):
    with pytest.raises(HandledError, match="text is empty"):
        await library.text_load(TextLoadRequest(id="x", text=""), ctx())
    with pytest.raises(HandledError) as failure:
        await library.text_load(TextLoadRequest(id="x", text="é" * 501), ctx())  # 1002 bytes
    assert failure.value.type == "too-large" and "1002 bytes" in failure.value.message


async def test_add_list_get_and_content(library, emitted):
    [added] = await ask(library, operation="add-document", document_id="d1", user="u",
                        collection="c", title="Report", comments="q3", tags=["x"],
                        content=b64(b"# Report\n\ntext"))
    assert (added.document.kind, added.document.size, added.document.tags) == (
        "text/markdown", 14, ["x"])
    assert emitted.sent == []  # stored only: processing is a separate step
    await ask(library, operation="add-document", id="d2", user="u", collection="c",
              kind="application/pdf", content=b64(PDF_HEAD))
    [listing] = await ask(library, operation="list-documents", user="u", collection="c")
    assert [d.id for d in listing.documents] == ["d1", "d2"]
    [other] = await ask(library, operation="list-documents", user="v", collection="c")
    assert other.documents == []
    [got] = await ask(library, operation="get-document-metadata", document_id="d1",
                      user="u", collection="c")
    assert got.document == added.document
    [content] = await ask(library, operation="get-document-content", document_id="d2",
                          user="u", collection="c")
    assert base64.b64decode(content.content) == PDF_HEAD
    with pytest.raises(NotFound):
        await ask(library, operation="get-document-metadata", document_id="d1", user="v",
                  collection="c")
    with pytest.raises(HandledError, match="document_id is required"):
        await ask(library, operation="get-document-metadata")


async def test_streamed_listing_comes_in_pages(library, monkeypatch):
    monkeypatch.setattr(service, "LIST_PAGE", 2)
    for i in range(5):
        await ask(library, operation="add-document", document_id=f"d{i}",
                  content=b64(b"x"))
    pages = await ask(library, operation="list-documents", streaming=True)
    assert [[d.id for d in p.documents] for p in pages] == [["d0", "d1"], ["d2", "d3"], ["d4"]]
    for i in range(5, 6):
        await ask(library, operation="add-document", document_id=f"d{i}", content=b64(b"x"))
    pages = await ask(library, operation="list-documents", streaming=True)
    assert [len(p.documents) for p in pages] == [2, 2, 2]
    [whole] = await ask(library, operation="list-documents")
    assert len(whole.documents) == 6


async def test_add_processing_sends_the_stored_document_down_a_flow(library, store, emitted):
    await ask(library, operation="add-document", document_id="d", content=b64(b"words"))
    [answer] = await ask(library, operation="add-processing", document_id="d",
                         flow="papers")
    assert (answer.processing.flow, answer.processing.document_id) == ("papers", "d")
    [default] = await ask(library, operation="add-processing", document_id="d")
    assert default.processing.flow == "default"  # the flow it was asked on
    assert [(f, s, r.document.id, r.kind) for f, s, r in emitted.sent] == [
        ("papers", "decode", "d", "text/plain"), ("default", "decode", "d", "text/plain")]
    with pytest.raises(NotFound):
        await ask(library, operation="add-processing", document_id="nope")


async def test_remove_tells_every_flow_it_was_processed_on_before_deleting(
        library, store, emitted):
    await library.text_load(TextLoadRequest(id="d", user="u", collection="c", title="T",
                                            text="words"), ctx("papers"))
    await library.text_load(TextLoadRequest(id="d", user="u", collection="c", text="words"),
                            ctx("books"))
    emitted.sent.clear()
    # Each DocumentRemoved goes out while the library still has the document.
    emitted.check = lambda flow, stage, record: store.get("u", "c", "d")
    [answer] = await ask(library, operation="remove-document", document_id="d", user="u",
                         collection="c")
    assert answer.document.id == "d"
    assert [(f, s) for f, s, _ in emitted.sent] == [
        ("books", "document-removed"), ("default", "document-removed"),
        ("papers", "document-removed")]
    assert all(isinstance(r, DocumentRemoved) and (r.document.id, r.document.user,
               r.document.collection) == ("d", "u", "c") for _, _, r in emitted.sent)
    with pytest.raises(NotFound):
        store.get("u", "c", "d")
    with pytest.raises(NotFound):
        await ask(library, operation="remove-document", document_id="d", user="u",
                  collection="c")


async def test_a_remove_that_could_not_tell_the_stores_keeps_the_document(library, store,
                                                                         emitted):
    await ask(library, operation="add-document", document_id="d", content=b64(b"words"))

    def broker_gone(flow, stage, record):
        raise ConnectionError("broker gone")

    emitted.check = broker_gone
    with pytest.raises(ConnectionError):
        await ask(library, operation="remove-document", document_id="d")
    assert store.get("trustgraph", "default", "d").id == "d"  # so removing again finishes


async def test_a_large_document_uploaded_in_parts(library, store, emitted):
    pdf = PDF_HEAD + b"x" * 1500  # over the one-request limit of 1000 bytes
    with pytest.raises(HandledError, match="upload larger documents in parts"):
        await ask(library, operation="add-document", document_id="big", content=b64(pdf))
    [begun] = await ask(library, operation="begin-upload", document_id="big", title="Big",
                        size=len(pdf))
    for part in range(2):
        [done] = await ask(library, operation="upload-part", upload_id=begun.upload_id,
                           part=part, content=b64(pdf[part * 800:(part + 1) * 800]))
        assert done.document is None and done.error is None
    [complete] = await ask(library, operation="complete-upload", upload_id=begun.upload_id)
    assert (complete.document.kind, complete.document.size) == ("application/pdf", len(pdf))
    assert store.read("trustgraph", "default", "big")[1] == pdf
    assert emitted.sent == []  # stored only; add-processing sends it down a flow
    await ask(library, operation="add-processing", document_id="big")
    assert [(s, r.kind) for _, s, r in emitted.sent] == [("decode", "application/pdf")]


async def test_upload_errors(library):
    cases = [
        (dict(operation="begin-upload", document_id="d"), "bad-request", "size"),
        (dict(operation="begin-upload", document_id="d", size=10 ** 12), "too-large",
         "TG_MAX_UPLOAD_BYTES"),
        (dict(operation="begin-upload", document_id="d", size=5, kind="image/png"),
         "bad-request", "cannot process"),
        (dict(operation="begin-upload", size=5), "bad-request", "document_id is required"),
        (dict(operation="upload-part", content=b64(b"x")), "bad-request",
         "upload_id is required"),
        (dict(operation="complete-upload", upload_id="f" * 32), "not-found", "no upload"),
    ]
    for fields, type, message in cases:
        with pytest.raises(HandledError) as failure:
            await ask(library, **fields)
        assert failure.value.type == type and message in failure.value.message, fields
    [begun] = await ask(library, operation="begin-upload", document_id="d", size=4,
                        kind="application/pdf")
    with pytest.raises(HandledError, match="part 0 is 1001 bytes"):
        await ask(library, operation="upload-part", upload_id=begun.upload_id,
                  content=b64(b"x" * 1001))
    await ask(library, operation="upload-part", upload_id=begun.upload_id, content=b64(b"text"))
    with pytest.raises(HandledError, match="not a PDF"):
        await ask(library, operation="complete-upload", upload_id=begun.upload_id)
