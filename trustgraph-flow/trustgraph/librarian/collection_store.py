"""Collections in the library's database: each of a user's collections with its name,
description and tags (``trustgraph.schema.collections``).

A collection's row is made by the first document stored in it (``ensure_collection``,
in the same write transaction as the document) or by ``update``; ``delete`` removes it
with everything the library holds in it: documents (rows and content files), their
processing records and unfinished uploads. Every method blocks (SQLite, files):
callers on an event loop run them with ``asyncio.to_thread``.
"""
import json
import shutil

from trustgraph.schema import CollectionMetadata

from .files import fsync_dir
from .store import LibraryStore
from .tables import ensure_collection

_FIELDS = "collection, name, description, tags"


class CollectionStore:
    def __init__(self, library: LibraryStore) -> None:
        self.library = library

    def of_user(self, user: str, tags: list[str] | None = None
                ) -> list[CollectionMetadata]:
        """The user's collections by id; with ``tags``, those having any of them."""
        with self.library.transaction() as db:
            found = [_metadata(row) for row in db.execute(
                f"SELECT {_FIELDS} FROM collection WHERE user = ? ORDER BY collection",
                (user,))]
        if tags:
            found = [c for c in found if set(c.tags) & set(tags)]
        return found

    def update(self, user: str, collection: str, name: str | None,
               description: str | None, tags: list[str] | None) -> CollectionMetadata:
        """Sets the fields given (None: left as they are), making the collection if
        need be; the collection as stored."""
        with self.library.transaction(write=True) as db:
            ensure_collection(db, user, collection)
            for column, value in (("name", name), ("description", description),
                                  ("tags", None if tags is None else json.dumps(tags))):
                if value is not None:  # the column names are the fixed ones above
                    db.execute(f"UPDATE collection SET {column} = ? WHERE user = ? AND "
                               "collection = ?", (value, user, collection))
            row = db.execute(f"SELECT {_FIELDS} FROM collection WHERE user = ? AND "
                             "collection = ?", (user, collection)).fetchone()
        return _metadata(row)

    def delete(self, user: str, collection: str) -> int:
        """Removes the collection and everything the library holds in it; how many
        documents it held (0 for a collection that is not there)."""
        scope = (user, collection)
        with self.library.transaction(write=True) as db:
            ids = [id for id, in db.execute(
                "SELECT id FROM document WHERE user = ? AND collection = ?", scope)]
            uploads = [id for id, in db.execute(
                "SELECT id FROM upload WHERE user = ? AND collection = ?", scope)]
            for table in ("document", "processing", "upload", "collection"):
                db.execute(f"DELETE FROM {table} WHERE user = ? AND collection = ?", scope)
            # Inside the transaction, as a document's removal does: a crash leaves
            # files without rows (never read), not rows without files.
            paths = [self.library.content_path(user, collection, id) for id in ids]
            for path in paths:
                path.unlink(missing_ok=True)
        for directory in {path.parent for path in paths}:
            fsync_dir(directory)
        for upload in uploads:
            shutil.rmtree(self.library.uploads_dir / upload, ignore_errors=True)
        return len(ids)


def _metadata(row: tuple) -> CollectionMetadata:
    collection, name, description, tags = row
    return CollectionMetadata(collection=collection, name=name, description=description,
                              tags=json.loads(tags))
