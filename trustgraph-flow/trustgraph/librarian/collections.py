"""Service ``collection-management`` of the librarian: a user's collections as items of
their own, listed, named and deleted (``trustgraph.schema.collections``).

Deleting a collection asks every store owner to delete its part first (each over the
bus, at once: ``COLLECTION_OWNERS``), and only when all of them have, removes the
library's documents and the collection itself. An owner that fails (or is not
running) leaves the collection listed, and the error names what was and was not
deleted: deleting it again finishes the job, as each part's delete is safe to repeat.
"""
import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping

from trustgraph.base import BadRequest, Context, HandledError, Service, ServiceError
from trustgraph.schema import (
    COLLECTION_OWNERS,
    COLLECTIONS_FLOW,
    CollectionDeleteRequest,
    CollectionDeleteResponse,
    CollectionManagementRequest,
    CollectionManagementResponse,
)
from trustgraph.schema.collections import CollectionOperation
from trustgraph.schema.operations import per_operation

from .collection_store import CollectionStore
from .graph_progress import GraphProgressStore

log = logging.getLogger(__name__)

NAME = "collection-management"
MAX_COLLECTION_CHARS = 256


class Collections:
    def __init__(self, store: CollectionStore, owners: Iterable[str],
                 progress: GraphProgressStore | None = None) -> None:
        """``owners``: the store owners' services to ask when deleting (of
        ``COLLECTION_OWNERS``, those of the processors this deployment runs);
        ``progress``: the documents' graph progress, forgotten with them."""
        self.store = store
        self.owners = tuple(owners)
        self.progress = progress

    async def handle(self, request: CollectionManagementRequest, ctx: Context
                     ) -> CollectionManagementResponse:
        if not request.user:
            raise BadRequest("user must not be empty")
        return await OPERATIONS[request.operation](self, request, ctx)

    async def list_collections(self, request: CollectionManagementRequest, ctx: Context
                               ) -> CollectionManagementResponse:
        found = await asyncio.to_thread(self.store.of_user, request.user, request.tag_filter)
        return CollectionManagementResponse(collections=found)

    async def update_collection(self, request: CollectionManagementRequest, ctx: Context
                                ) -> CollectionManagementResponse:
        stored = await asyncio.to_thread(
            self.store.update, request.user, named(request), request.name,
            request.description, request.tags)
        log.info("id=%s collection %r of %s set", ctx.id, stored.collection, request.user)
        return CollectionManagementResponse(collections=[stored])

    async def delete_collection(self, request: CollectionManagementRequest, ctx: Context
                                ) -> CollectionManagementResponse:
        user, collection = request.user, named(request)
        answers = await asyncio.gather(*(self._delete_in(owner, user, collection, ctx)
                                         for owner in self.owners), return_exceptions=True)
        removed: dict[str, int] = {}
        failed = []
        for owner, answer in zip(self.owners, answers, strict=True):
            if isinstance(answer, BaseException):
                failed.append(f"{COLLECTION_OWNERS[owner][0]} ({_reason(answer)})")
            else:
                removed |= answer
        if failed:
            done = ", ".join(f"{store} ({n})" for store, n in removed.items()) or "nothing"
            raise HandledError("collection-delete-error", (
                f"collection {collection!r} of {user!r} is not deleted from "
                f"{'; '.join(failed)}; deleted so far: {done}. It stays listed: "
                "delete it again to finish"))
        removed["documents"] = await asyncio.to_thread(self.store.delete, user, collection)
        if self.progress is not None:
            await asyncio.to_thread(self.progress.forget, user, collection)
        log.info("id=%s collection %r of %s deleted: %s", ctx.id, collection, user,
                 ", ".join(f"{store} {n}" for store, n in removed.items()))
        return CollectionManagementResponse(removed=removed)

    async def _delete_in(self, owner: str, user: str, collection: str, ctx: Context
                         ) -> dict[str, int]:
        client = await ctx.clients.get(owner)
        answer = await client.call(CollectionDeleteRequest(user=user, collection=collection),
                                   CollectionDeleteResponse)
        return answer.removed


def named(request: CollectionManagementRequest) -> str:
    """The collection an update or delete names, checked."""
    if not request.collection:
        raise BadRequest(f"{request.operation} needs collection")
    if len(request.collection) > MAX_COLLECTION_CHARS:
        raise BadRequest(f"collection is {len(request.collection)} characters long, over "
                         f"{MAX_COLLECTION_CHARS}")
    return request.collection


def _reason(error: BaseException) -> str:
    if isinstance(error, ServiceError):
        return f"{error.error.type}: {error.error.message}"
    return f"{type(error).__name__}: {error}"


# Each operation CollectionManagementRequest declares, and the method that does it.
OPERATIONS: Mapping[CollectionOperation, Callable[
    [Collections, CollectionManagementRequest, Context],
    Awaitable[CollectionManagementResponse]]] = per_operation(
    CollectionManagementRequest, {
        "list-collections": Collections.list_collections,
        "update-collection": Collections.update_collection,
        "delete-collection": Collections.delete_collection,
    }, f"the {NAME} service's operations")


def running_owners(lazy_rag_enabled: bool) -> list[str]:
    """The store owners a deployment runs: LazyRAG's only while it is turned on."""
    return [service for service, (processor, _) in COLLECTION_OWNERS.items()
            if processor != "lazy-rag" or lazy_rag_enabled]


def collections_service(collections: Collections) -> Service:
    return Service(NAME, CollectionManagementRequest, CollectionManagementResponse,
                   collections.handle, error_type="collection-management-error",
                   global_flow=COLLECTIONS_FLOW)
