"""The library store on its own: documents, replacement, tenancy, processing records,
content files named by hashes, and reads that never pair content with the wrong
metadata."""
import hashlib
import os
import sqlite3
import time

import pytest

from trustgraph.base import HandledError
from trustgraph.librarian.store import (
    ContentMismatch,
    ContentMissing,
    LibraryStore,
    NotFound,
    content_key,
)
from trustgraph.schema import DocumentMetadata


def doc(id, user="alice", collection="papers", **fields):
    return DocumentMetadata(id=id, user=user, collection=collection, **fields)


@pytest.fixture
def store(tmp_path):
    return LibraryStore(tmp_path)


def test_put_get_read_list_remove(store, tmp_path):
    stored = store.put(doc("d1", title="One", kind="text/plain", tags=["a", "b"],
                           comments="first"), b"hello world")
    assert stored.size == 11 and stored.sha256 == hashlib.sha256(b"hello world").hexdigest()
    assert abs(stored.time - time.time()) < 5
    assert store.get("alice", "papers", "d1") == stored
    assert store.read("alice", "papers", "d1") == (stored, b"hello world")
    store.put(doc("d0", kind="text/markdown"), b"# T")
    assert [d.id for d in store.documents("alice", "papers")] == ["d0", "d1"]
    assert (tmp_path / "library" / "library.db").exists()

    assert store.remove("alice", "papers", "d1") == stored
    assert not store.content_path("alice", "papers", "d1").exists()
    assert [d.id for d in store.documents("alice", "papers")] == ["d0"]
    with pytest.raises(NotFound) as missing:
        store.get("alice", "papers", "d1")
    assert missing.value.type == "not-found"
    assert "'d1'" in missing.value.message and "'papers'" in missing.value.message
    for operation in (store.read, store.remove):
        with pytest.raises(NotFound):
            operation("alice", "papers", "d1")
    assert store.processing("alice", "papers", "d1") == []


def test_storing_again_replaces_the_document_and_keeps_its_processing(store):
    store.put(doc("d", title="v1", kind="text/plain"), b"first version", flow="default")
    second = store.put(doc("d", title="v2", kind="text/markdown"), b"second", flow="papers")
    assert store.documents("alice", "papers") == [second]
    assert store.read("alice", "papers", "d") == (second, b"second")
    assert [p.flow for p in store.processing("alice", "papers", "d")] == ["default", "papers"]
    store.put(doc("d"), b"third", flow="papers")  # the same flow again: one record
    assert len(store.processing("alice", "papers", "d")) == 2
    # One file per document, whatever the number of versions; nothing left aside.
    files = [p for p in store.content_dir.rglob("*") if p.is_file()]
    assert files == [store.content_path("alice", "papers", "d")]


def test_tenants_never_see_each_others_documents(store):
    # The same id in two users and in two collections of one user: four documents.
    for user in ("alice", "bob"):
        for collection in ("papers", "notes"):
            store.put(doc("shared", user, collection, title=f"{user}/{collection}"),
                      f"{user} {collection}".encode(), flow="default")
    store.put(doc("only-alice"), b"x")
    for user in ("alice", "bob"):
        for collection in ("papers", "notes"):
            document, content = store.read(user, collection, "shared")
            assert (document.title, content) == (f"{user}/{collection}",
                                                 f"{user} {collection}".encode())
    assert [d.id for d in store.documents("alice", "papers")] == ["only-alice", "shared"]
    assert [d.id for d in store.documents("bob", "papers")] == ["shared"]
    assert store.documents("carol", "papers") == []
    with pytest.raises(NotFound):
        store.get("bob", "papers", "only-alice")
    with pytest.raises(NotFound):
        store.add_processing("bob", "papers", "only-alice", "default")

    assert [(c.collection, c.documents) for c in store.collections("alice")] == [
        ("notes", 1), ("papers", 2)]
    assert [c.collection for c in store.collections("bob")] == ["notes", "papers"]
    assert store.collections("carol") == []

    store.remove("alice", "papers", "shared")
    assert store.read("alice", "notes", "shared")[1] == b"alice notes"
    assert store.read("bob", "papers", "shared")[1] == b"bob papers"
    assert [p.user for p in store.processing("bob", "papers", "shared")] == ["bob"]
    assert store.processing("alice", "papers", "shared") == []


def test_content_files_are_named_by_hashes_not_by_user_input(store):
    hostile = "../../../../etc/passwd"
    store.put(doc(hostile, user="../u", collection="/abs"), b"data")
    path = store.content_path("../u", "/abs", hostile)
    key = content_key("../u", "/abs", hostile)
    assert path == store.content_dir / key[:2] / key and path.read_bytes() == b"data"
    assert path.resolve().is_relative_to(store.content_dir.resolve())
    # The key is unambiguous: fields cannot be shifted between user, collection and id.
    assert content_key("a", "b/c", "d") != content_key("a/b", "c", "d")
    assert content_key("a", "bc", "d") != content_key("ab", "c", "d")


def test_documents_in_pages(store):
    for i in range(7):
        store.put(doc(f"d{i}"), b"x")
    first = store.documents("alice", "papers", limit=3)
    second = store.documents("alice", "papers", after=first[-1].id, limit=3)
    third = store.documents("alice", "papers", after=second[-1].id, limit=3)
    assert [d.id for d in first + second + third] == [f"d{i}" for i in range(7)]


def test_add_processing(store):
    store.put(doc("d", kind="application/pdf"), b"%PDF-1.4")
    document, processing = store.add_processing("alice", "papers", "d", "papers-flow")
    assert document.kind == "application/pdf"
    assert (processing.document_id, processing.flow, processing.user,
            processing.collection) == ("d", "papers-flow", "alice", "papers")
    assert store.processing("alice", "papers", "d") == [processing]


def test_reads_refuse_content_that_does_not_match_its_metadata(store):
    store.put(doc("d"), b"original")
    path = store.content_path("alice", "papers", "d")
    path.write_bytes(b"changed behind the store's back")
    with pytest.raises(ContentMismatch):
        store.read("alice", "papers", "d")
    path.unlink()
    with pytest.raises(ContentMissing):
        store.read("alice", "papers", "d")


def test_metadata_survives_reopening_and_is_in_wal_mode(store, tmp_path):
    stored = store.put(doc("d", tags=["x"]), b"content")
    again = LibraryStore(tmp_path)
    assert again.read("alice", "papers", "d") == (stored, b"content")
    with sqlite3.connect(tmp_path / "library" / "library.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_failed_write_leaves_the_old_version_and_no_partial_file(store, monkeypatch):
    stored = store.put(doc("d"), b"old")

    def broken_replace(source, target):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        store.put(doc("d"), b"new")
    monkeypatch.undo()
    assert store.read("alice", "papers", "d") == (stored, b"old")
    assert [p.name for p in store.content_path("alice", "papers", "d").parent.iterdir()] == [
        store.content_path("alice", "papers", "d").name]


def test_stale_writes_aside_are_cleaned_up(store):
    store.put(doc("d"), b"x")
    directory = store.content_path("alice", "papers", "d").parent
    stale, fresh = directory / ".abc.1234.tmp", directory / ".abc.5678.tmp"
    stale.write_bytes(b"partial")
    fresh.write_bytes(b"being written")
    old = time.time() - 2 * 3600
    os.utime(stale, (old, old))
    assert store.remove_stale_temporaries() == 1
    assert not stale.exists() and fresh.exists()


def test_upload_in_parts(store):
    upload = store.begin_upload(doc("big", title="Big", tags=["t"]), size=10)
    store.upload_part("alice", "papers", upload, 1, b"56789")
    store.upload_part("alice", "papers", upload, 0, b"xxxxx")
    store.upload_part("alice", "papers", upload, 0, b"01234")  # sent again: replaced
    assert store.upload_head("alice", "papers", upload, 3) == b"012"
    stored = store.complete_upload("alice", "papers", upload, "text/plain")
    assert (stored.title, stored.tags, stored.kind, stored.size) == ("Big", ["t"],
                                                                     "text/plain", 10)
    assert stored.sha256 == hashlib.sha256(b"0123456789").hexdigest()
    assert store.read("alice", "papers", "big") == (stored, b"0123456789")
    assert list(store.uploads_dir.iterdir()) == []
    with pytest.raises(NotFound):  # it is over
        store.upload_part("alice", "papers", upload, 2, b"more")


def test_an_upload_completes_only_whole_and_only_for_its_tenant(store):
    upload = store.begin_upload(doc("big"), size=8)
    for user, collection, upload_id in (("bob", "papers", upload), ("alice", "notes", upload),
                                        ("alice", "papers", "../../content"),
                                        ("alice", "papers", "0" * 32)):
        with pytest.raises(NotFound):
            store.upload_part(user, collection, upload_id, 0, b"x")
        with pytest.raises(NotFound):
            store.complete_upload(user, collection, upload_id)
    with pytest.raises(HandledError, match="missing part"):
        store.complete_upload("alice", "papers", upload)
    store.upload_part("alice", "papers", upload, 2, b"cd")
    with pytest.raises(HandledError, match=r"missing part\(s\) 0, 1$"):
        store.complete_upload("alice", "papers", upload)
    store.upload_part("alice", "papers", upload, 0, b"ab")
    store.upload_part("alice", "papers", upload, 1, b"c")
    with pytest.raises(HandledError, match="has 5 bytes in 3 part"):
        store.complete_upload("alice", "papers", upload)
    with pytest.raises(HandledError, match="part must be from 0"):
        store.upload_part("alice", "papers", upload, -1, b"x")
    store.upload_part("alice", "papers", upload, 3, b"efg")
    assert store.complete_upload("alice", "papers", upload).size == 8
    assert store.read("alice", "papers", "big")[1] == b"abccdefg"


def test_abandoned_uploads_are_forgotten(store):
    old = store.begin_upload(doc("a"), size=3)
    store.upload_part("alice", "papers", old, 0, b"abc")
    fresh = store.begin_upload(doc("b"), size=3)
    store.upload_part("alice", "papers", fresh, 0, b"abc")
    day_ago = time.time() - 25 * 3600
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE upload SET time = ? WHERE id = ?", (int(day_ago), old))
    os.utime(store.uploads_dir / old, (day_ago, day_ago))
    assert store.remove_stale_uploads() == 1
    with pytest.raises(NotFound):
        store.upload("alice", "papers", old)
    assert store.complete_upload("alice", "papers", fresh).size == 3
