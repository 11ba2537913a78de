"""The library on disk: document metadata in SQLite, content in files.

Layout under ``TG_DATA_DIR/library``::

    library.db              metadata (WAL; synchronous=FULL, so a commit survives power loss),
                            and what the decoder made of each document sent down a flow
    content/ab/abcdef…      one file per document
    uploads/<upload id>/    the parts of a document being uploaded in parts

A content file's name is the SHA-256 of the document's key ``[user, collection,
id]``, never anything the user typed, so no id can reach outside the directory and
the same id in two tenants is two files. Re-storing a document replaces its file
atomically (written aside, fsynced, renamed over, directory fsynced) and its row in
the same SQLite write transaction, so the row and the file change together as seen
by every reader, in this process or another one on the same data dir.

Every method blocks (SQLite, file I/O, fsync): callers on an event loop run them
with ``asyncio.to_thread``. Each opens its own short-lived connection, so the object
is safe to share between threads and several processes may use one data dir.
"""
import hashlib
import json
import os
import re
import shutil
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from trustgraph.base import BadRequest, HandledError
from trustgraph.schema import DocumentMetadata, ProcessingMetadata
from trustgraph.schema.librarian import CollectionInfo
from trustgraph.sqlite_transaction import transaction

from .files import ensure_dir, fsync_dir, read_parts, write_aside
from .tables import SCHEMA, add_missing_collections, add_missing_columns, ensure_collection

_COLUMNS = ("user, collection, id, title, kind, comments, tags, size, sha256, time, "
            "version")
STALE_TEMPORARY_SECONDS = 3600  # a write aside older than this was left by a crash
STALE_UPLOAD_SECONDS = 24 * 3600  # an upload not completed within this is abandoned
_UPLOAD_ID = re.compile(r"[0-9a-f]{32}")
_PART_NAME = re.compile(r"[0-9]{6}")
MAX_PARTS = 999_999


class NotFound(HandledError):
    def __init__(self, user: str, collection: str, id: str, what: str = "document") -> None:
        super().__init__("not-found", f"no {what} {id!r} in collection {collection!r} "
                                      f"of user {user!r}")


class UploadIncomplete(BadRequest):
    pass


class ContentMismatch(Exception):
    """The content read does not match its metadata: it is being replaced right now
    (or the file was damaged); reading again later gets a consistent pair."""


class ContentMissing(Exception):
    """The metadata is there, the content file is not (deleted behind the store's back)."""


def content_key(user: str, collection: str, id: str) -> str:
    return hashlib.sha256(json.dumps([user, collection, id]).encode()).hexdigest()


@dataclass(frozen=True)
class DecoderRecord:
    """What the decoder recorded of one version of a document on one flow."""

    version: int
    chunks: int | None  # None: not decoded yet
    error: str | None  # why it could not be decoded


class LibraryStore:
    def __init__(self, data_dir: str | Path) -> None:
        self.root = Path(data_dir) / "library"
        self.path = self.root / "library.db"
        self.content_dir = self.root / "content"
        self.uploads_dir = self.root / "uploads"
        ensure_dir(self.content_dir)
        ensure_dir(self.uploads_dir)
        with closing(sqlite3.connect(self.path, timeout=30)) as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(SCHEMA)
        with self.transaction(write=True) as db:
            add_missing_columns(db)
            add_missing_collections(db)

    # --- paths -------------------------------------------------------------------

    def content_path(self, user: str, collection: str, id: str) -> Path:
        key = content_key(user, collection, id)
        return self.content_dir / key[:2] / key

    def remove_stale_temporaries(self) -> int:
        """Deletes writes-aside left by a crash; returns how many."""
        cutoff, removed = time.time() - STALE_TEMPORARY_SECONDS, 0
        for path in self.content_dir.glob("*/.*.tmp"):
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except FileNotFoundError:
                pass
        return removed

    # --- transactions ------------------------------------------------------------

    @contextmanager
    def transaction(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        # A write's lock, taken up front, also orders the file renames done inside it.
        with closing(sqlite3.connect(self.path, timeout=30, isolation_level=None)) as db:
            db.execute("PRAGMA synchronous=FULL")
            with transaction(db, write):
                yield db

    # --- documents ---------------------------------------------------------------

    def put(self, document: DocumentMetadata, content: bytes,
            flow: str | None = None) -> DocumentMetadata:
        """Stores (or replaces) a document durably; with ``flow``, also records that
        it is being processed on that flow. Returns the metadata as stored (size,
        digest and time filled in)."""
        path = self.content_path(document.user, document.collection, document.id)
        ensure_dir(path.parent)
        aside = write_aside(path, [content])
        try:
            stored = document.model_copy(update={
                "size": len(content), "sha256": hashlib.sha256(content).hexdigest()})
            return self._commit(stored, aside, path, flow)
        finally:
            aside.unlink(missing_ok=True)

    def _commit(self, document: DocumentMetadata, aside: Path, path: Path,
                flow: str | None, upload_id: str = "") -> DocumentMetadata:
        """Moves the fsynced file ``aside`` to ``path`` and stores the metadata, as one
        write transaction (which ends the upload ``upload_id``, if any)."""
        with self.transaction(write=True) as db:
            before = db.execute("SELECT version FROM document WHERE user = ? AND "
                                "collection = ? AND id = ?",
                                (document.user, document.collection, document.id)).fetchone()
            stored = document.model_copy(update={"time": int(time.time()),
                                                 "version": (before[0] if before else 0) + 1})
            os.replace(aside, path)
            fsync_dir(path.parent)
            db.execute(f"INSERT OR REPLACE INTO document ({_COLUMNS}) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", _row(stored))
            ensure_collection(db, stored.user, stored.collection)
            if flow is not None:
                _record_processing(db, stored, flow)
            if upload_id:
                db.execute("DELETE FROM upload WHERE id = ?", (upload_id,))
        return stored

    def get(self, user: str, collection: str, id: str) -> DocumentMetadata:
        with self.transaction() as db:
            return _get(db, user, collection, id)

    def documents(self, user: str, collection: str, after: str = "",
                  limit: int = -1) -> list[DocumentMetadata]:
        """The collection's documents in id order, those after ``after`` (a page)."""
        with self.transaction() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM document WHERE user = ? AND collection = ? "
                "AND id > ? ORDER BY id LIMIT ?", (user, collection, after, limit))
            return [_metadata(row) for row in rows]

    def add_metadata(self, documents: list[DocumentMetadata]) -> int:
        """Documents known by their metadata alone (a knowledge core's: the content
        stays where it was), each unless the collection has it already; how many."""
        with self.transaction(write=True) as db:
            for user, collection in {(d.user, d.collection) for d in documents}:
                ensure_collection(db, user, collection)
            before = db.total_changes
            db.executemany(f"INSERT OR IGNORE INTO document ({_COLUMNS}) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", map(_row, documents))
            return db.total_changes - before

    def collections(self, user: str) -> list[CollectionInfo]:
        """The user's collections that hold documents, by name, each with how many."""
        with self.transaction() as db:
            rows = db.execute("SELECT collection, count(*) FROM document WHERE user = ? "
                              "GROUP BY collection ORDER BY collection", (user,))
            return [CollectionInfo(collection=name, documents=n) for name, n in rows]

    def read(self, user: str, collection: str, id: str) -> tuple[DocumentMetadata, bytes]:
        """Metadata and content that belong together (``ContentMismatch`` when the
        document was replaced while being read, twice in a row)."""
        missing = 0
        for _ in range(2):
            document = self.get(user, collection, id)
            try:
                content = self.content_path(user, collection, id).read_bytes()
            except FileNotFoundError:
                missing += 1  # removed between the two reads, or lost
                continue
            if hashlib.sha256(content).hexdigest() == document.sha256:
                return document, content
        self.get(user, collection, id)  # NotFound if it is gone now
        if missing == 2:
            raise ContentMissing(f"document {id!r} has metadata but no content file")
        raise ContentMismatch(f"the content of document {id!r} does not match its "
                              "metadata (being replaced?)")

    def remove(self, user: str, collection: str, id: str) -> DocumentMetadata:
        """Deletes a document's metadata, processing records and content."""
        path = self.content_path(user, collection, id)
        with self.transaction(write=True) as db:
            document = _get(db, user, collection, id)
            db.execute("DELETE FROM document WHERE user = ? AND collection = ? AND id = ?",
                       (user, collection, id))
            db.execute("DELETE FROM processing WHERE user = ? AND collection = ? "
                       "AND document_id = ?", (user, collection, id))
            path.unlink(missing_ok=True)
        fsync_dir(path.parent)
        return document

    # --- uploads in parts ------------------------------------------------------------

    def begin_upload(self, document: DocumentMetadata, size: int) -> str:
        upload_id = uuid.uuid4().hex
        with self.transaction(write=True) as db:
            db.execute("INSERT INTO upload (id, user, collection, document_id, title, kind, "
                       "comments, tags, size, time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (upload_id, document.user, document.collection, document.id,
                        document.title, document.kind, document.comments,
                        json.dumps(document.tags), size, int(time.time())))
        return upload_id

    def upload(self, user: str, collection: str,
               upload_id: str) -> tuple[DocumentMetadata, int]:
        """The document being uploaded (as far as known before its content) and its
        announced size; ``NotFound`` unless the upload is this tenant's."""
        with self.transaction() as db:
            return _upload(db, user, collection, upload_id)

    def upload_part(self, user: str, collection: str, upload_id: str, part: int,
                    content: bytes) -> None:
        """Stores one part durably (a part sent again replaces the earlier one)."""
        self.upload(user, collection, upload_id)
        if not 0 <= part <= MAX_PARTS:
            raise UploadIncomplete(f"part must be from 0 to {MAX_PARTS}, not {part}")
        directory = self.uploads_dir / upload_id
        ensure_dir(directory)
        path = directory / f"{part:06d}"
        aside = write_aside(path, [content])
        try:
            os.replace(aside, path)
            fsync_dir(directory)
        finally:
            aside.unlink(missing_ok=True)

    def upload_head(self, user: str, collection: str, upload_id: str,
                    size: int = 4096) -> bytes:
        """The first bytes of part 0 (empty when it has not arrived)."""
        self.upload(user, collection, upload_id)
        try:
            with open(self.uploads_dir / upload_id / f"{0:06d}", "rb") as file:
                return file.read(size)
        except FileNotFoundError:
            return b""

    def complete_upload(self, user: str, collection: str, upload_id: str,
                        kind: str = "") -> DocumentMetadata:
        """Joins the parts into the document's content and stores it (replacing any
        document of that id); the upload is gone afterwards."""
        document, size = self.upload(user, collection, upload_id)
        directory = self.uploads_dir / upload_id
        parts = sorted(p for p in directory.iterdir() if _PART_NAME.fullmatch(p.name)) \
            if directory.exists() else []
        indexes = {int(p.name) for p in parts}
        missing = sorted(set(range(max(indexes, default=0) + 1)) - indexes)
        if missing:
            raise UploadIncomplete(f"upload {upload_id} is missing part(s) "
                                   f"{', '.join(map(str, missing[:10]))}")
        received = sum(p.stat().st_size for p in parts)
        if received != size:
            raise UploadIncomplete(f"upload {upload_id} has {received} bytes in "
                                   f"{len(parts)} part(s), not the {size} announced")
        path = self.content_path(user, collection, document.id)
        ensure_dir(path.parent)
        digest = hashlib.sha256()
        aside = write_aside(path, read_parts(parts, digest))
        try:
            stored = document.model_copy(update={"kind": kind or document.kind,
                                                 "size": size, "sha256": digest.hexdigest()})
            stored = self._commit(stored, aside, path, None, upload_id)
        finally:
            aside.unlink(missing_ok=True)
        shutil.rmtree(directory, ignore_errors=True)
        return stored

    def remove_stale_uploads(self) -> int:
        """Forgets uploads not completed in time, and part directories of none."""
        cutoff = int(time.time()) - STALE_UPLOAD_SECONDS
        with self.transaction(write=True) as db:
            db.execute("DELETE FROM upload WHERE time < ?", (cutoff,))
            live = {upload_id for upload_id, in db.execute("SELECT id FROM upload")}
        removed = 0
        for directory in self.uploads_dir.iterdir():
            if directory.name not in live and directory.stat().st_mtime < cutoff:
                shutil.rmtree(directory, ignore_errors=True)
                removed += 1
        return removed

    # --- processing ----------------------------------------------------------------

    def add_processing(self, user: str, collection: str, id: str,
                       flow: str) -> tuple[DocumentMetadata, ProcessingMetadata]:
        with self.transaction(write=True) as db:
            document = _get(db, user, collection, id)
            now = _record_processing(db, document, flow)
        return document, ProcessingMetadata(document_id=id, flow=flow, user=user,
                                            collection=collection, time=now)

    def processing(self, user: str, collection: str, id: str) -> list[ProcessingMetadata]:
        """The flows the document was sent down, oldest first."""
        with self.transaction() as db:
            rows = db.execute(
                "SELECT flow, time FROM processing WHERE user = ? AND collection = ? "
                "AND document_id = ? ORDER BY time, flow", (user, collection, id))
            return [ProcessingMetadata(document_id=id, flow=flow, user=user,
                                       collection=collection, time=t) for flow, t in rows]

    def record_chunks(self, user: str, collection: str, id: str, flow: str, version: int,
                      chunks: int | None = None, error: str | None = None) -> bool:
        """The decoder's record of version ``version`` on ``flow``: cut into ``chunks``
        chunks, or not readable (``error``). Ignored (False) when a later version
        was sent down the flow meanwhile, or the document is no longer processed."""
        with self.transaction(write=True) as db:
            changed = db.execute(
                "UPDATE processing SET version = ?, chunks = ?, error = ? WHERE user = ? "
                "AND collection = ? AND document_id = ? AND flow = ? AND version <= ?",
                (version, chunks, error, user, collection, id, flow, version)).rowcount
        return changed > 0

    def load_status(self, user: str, collection: str, ids: list[str],
                    flow: str) -> dict[str, DecoderRecord]:
        """What the decoder recorded for each of ``ids`` sent down ``flow`` (ids never
        sent down it are left out)."""
        with self.transaction() as db:
            rows = db.execute(
                "SELECT document_id, version, chunks, error FROM processing WHERE user = ? "
                "AND collection = ? AND flow = ? AND document_id IN "
                "(SELECT value FROM json_each(?))",
                (user, collection, flow, json.dumps(ids)))
            return {id: DecoderRecord(version, chunks, error)
                    for id, version, chunks, error in rows}


def _get(db: sqlite3.Connection, user: str, collection: str, id: str) -> DocumentMetadata:
    row = db.execute(f"SELECT {_COLUMNS} FROM document WHERE user = ? AND collection = ? "
                     "AND id = ?", (user, collection, id)).fetchone()
    if row is None:
        raise NotFound(user, collection, id)
    return _metadata(row)


def _upload(db: sqlite3.Connection, user: str, collection: str,
            upload_id: str) -> tuple[DocumentMetadata, int]:
    row = db.execute("SELECT document_id, title, kind, comments, tags, size FROM upload "
                     "WHERE id = ? AND user = ? AND collection = ?",
                     (upload_id, user, collection)).fetchone() \
        if _UPLOAD_ID.fullmatch(upload_id) else None
    if row is None:
        raise NotFound(user, collection, upload_id, "upload")
    id, title, kind, comments, tags, size = row
    return DocumentMetadata(id=id, user=user, collection=collection, title=title, kind=kind,
                            comments=comments, tags=json.loads(tags)), size


def _record_processing(db: sqlite3.Connection, document: DocumentMetadata,
                       flow: str) -> int:
    """Records that the document's current version is going down ``flow`` (not yet
    decoded); returns the time recorded."""
    now = int(time.time())
    db.execute("INSERT OR REPLACE INTO processing (user, collection, document_id, flow, "
               "time, version, chunks, error) VALUES (?, ?, ?, ?, ?, ?, NULL, NULL)",
               (document.user, document.collection, document.id, flow, now,
                document.version))
    return now


def _row(d: DocumentMetadata) -> tuple:
    return (d.user, d.collection, d.id, d.title, d.kind, d.comments, json.dumps(d.tags),
            d.size, d.sha256, d.time, d.version)


def _metadata(row: tuple) -> DocumentMetadata:
    user, collection, id, title, kind, comments, tags, size, sha256, t, version = row
    return DocumentMetadata(id=id, user=user, collection=collection, title=title, kind=kind,
                            comments=comments, tags=json.loads(tags), size=size,
                            sha256=sha256, time=t, version=version)
