"""Collections as items of their own: TrustGraph's ``collection-management`` service
(docs/collections.md).

A collection is a user's (user, collection) scope that every store keys its data by.
It also has a name, a description and tags, kept by the librarian, which serves
``collection-management`` outside flows (asked on ``COLLECTIONS_FLOW``). Loading into a
collection that was never set creates it, with an empty name and description.

Operations of ``CollectionManagementRequest`` (each for the request's ``user``, the
caller's own unless an admin names another):

=================  =======================================  =========================
operation          request fields                           answer fields
=================  =======================================  =========================
list-collections   tag_filter? (any of these tags)          collections
update-collection  collection; name?, description?, tags?   collections: [as stored]
                   (a field left out stays as it was)
delete-collection  collection                               removed: {store: count}
=================  =======================================  =========================

Deleting a collection asks each store owner to delete its part (the services of
``COLLECTION_OWNERS``, bus only), then removes the library's documents and the
collection itself; the answer counts what each removed. Deleting again (or a
collection that never was) removes nothing and says so; an owner that fails leaves
the collection listed, so deleting it again finishes the job.
"""
from typing import Literal

from .librarian import LIBRARIAN_FLOW
from .pipeline import DEFAULT_USER
from .record import Record, Response

# Outside flows: the librarian serves it on this flow only.
COLLECTIONS_FLOW = LIBRARIAN_FLOW

CollectionOperation = Literal["list-collections", "update-collection", "delete-collection"]


class CollectionMetadata(Record):
    collection: str
    name: str = ""
    description: str = ""
    tags: list[str] = []


class CollectionManagementRequest(Record):
    operation: CollectionOperation
    user: str = DEFAULT_USER
    collection: str = ""
    name: str | None = None
    description: str | None = None
    tags: list[str] | None = None
    tag_filter: list[str] | None = None  # list-collections: those with any of these tags


class CollectionManagementResponse(Response):
    collections: list[CollectionMetadata] | None = None
    removed: dict[str, int] | None = None  # delete-collection: what each store removed
    end_of_stream: bool = True  # always one record


# The store owners' part of deleting a collection: the service each serves (bus only),
# the processor serving it, and what its answer counts.
COLLECTION_OWNERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "collection-triples": ("triples-store", ("triples",)),
    "collection-vectors": ("vector-store", ("chunks", "entities", "lexical")),
    # LazyRAG's community cache: asked only while LazyRAG runs (LAZY_RAG_ENABLED)
    "collection-communities": ("lazy-rag", ("communities",)),
}
# What the librarian itself removes.
LIBRARY_PARTS = ("documents",)


class CollectionDeleteRequest(Record):
    user: str
    collection: str


class CollectionDeleteResponse(Response):
    removed: dict[str, int] = {}  # e.g. {"triples": 120}
    end_of_stream: bool = True
