"""What a client asks of the library and the stores: loading documents and texts
(answered once the librarian holds them durably), the library's documents, the
user's collections (named, tagged, deleted from every store), embeddings, the
stores' query services, knowledge loads and how far each document's processing has
got. ``AsyncTrustGraph`` has these methods; its
websocket carries them (``request``)."""
from collections.abc import AsyncGenerator, Callable, Iterable
from contextlib import aclosing
from typing import Any

from trustgraph.schema.librarian import UPLOAD_PART_BYTES

from .wire import Term, b64, final_response, given, plain, scope, term

# Documents up to this size go in one load request (the librarian's default
# TG_MAX_DOCUMENT_BYTES); larger ones are uploaded in parts of UPLOAD_PART_BYTES.
SINGLE_LOAD_BYTES = 3 * 1024 * 1024
KNOWLEDGE_BATCH = 1000  # triples per knowledge-load request


class LibraryCalls:
    def request(self, service: str, request: dict[str, Any], flow: str | None = "default"
                ) -> AsyncGenerator[dict[str, Any], None]:
        raise NotImplementedError  # AsyncTrustGraph's: over its websocket

    # loading (flow services; answered once the librarian holds the document durably,
    # while its processing continues on the flow's pipeline)

    async def load_text(self, text: str, id: str, *, title: str = "",
                        user: str | None = None, collection: str | None = None,
                        flow: str = "default") -> None:
        """Load a text (plain or Markdown) as document ``id`` and process it on
        ``flow``. A text larger than one request carries is uploaded in parts."""
        data = text.encode()
        if len(data) > SINGLE_LOAD_BYTES:
            await self._upload_and_process(data, id, title=title, kind="", user=user,
                                           collection=collection, flow=flow)
            return
        await final_response(self.request("text-load", {
            "id": id, "title": title, "text": text, **scope(user, collection)}, flow))

    async def load_document(self, data: bytes, id: str, *, title: str = "", kind: str = "",
                            user: str | None = None, collection: str | None = None,
                            flow: str = "default") -> None:
        """Load a document's bytes (PDF, text, Markdown; ``kind`` a MIME type, or
        guessed by the librarian) as ``id`` and process it on ``flow``. A document
        larger than one request carries is uploaded in parts, then processed."""
        if len(data) > SINGLE_LOAD_BYTES:
            await self._upload_and_process(data, id, title=title, kind=kind, user=user,
                                           collection=collection, flow=flow)
            return
        await final_response(self.request("document-load", {
            "id": id, "title": title, "kind": kind, "data": b64(data),
            **scope(user, collection)}, flow))

    async def _upload_and_process(self, data: bytes, id: str, *, title: str, kind: str,
                                  user: str | None, collection: str | None,
                                  flow: str) -> None:
        await self.add_document(data, id, title=title, kind=kind, user=user,
                                collection=collection)
        await self.add_processing(id, flow=flow, user=user, collection=collection)

    # the library (outside flows)

    async def add_document(self, data: bytes, id: str, *, title: str = "", kind: str = "",
                           comments: str = "", tags: Iterable[str] = (),
                           user: str | None = None, collection: str | None = None
                           ) -> dict[str, Any]:
        """Store a document without processing it; returns its metadata. A large
        one goes in parts (begin-upload, upload-part each, complete-upload)."""
        fields = {"document_id": id, "title": title, "kind": kind, "comments": comments,
                  "tags": list(tags), **scope(user, collection)}
        if len(data) <= SINGLE_LOAD_BYTES:
            return (await self._librarian("add-document", content=b64(data),
                                          **fields))["document"]
        owner = scope(user, collection)
        upload = (await self._librarian("begin-upload", size=len(data), **fields))["upload_id"]
        for part, start in enumerate(range(0, len(data), UPLOAD_PART_BYTES)):
            await self._librarian("upload-part", upload_id=upload, part=part,
                                  content=b64(data[start:start + UPLOAD_PART_BYTES]), **owner)
        completed = await self._librarian("complete-upload", upload_id=upload, **owner)
        return completed["document"]

    async def list_documents(self, user: str | None = None, collection: str | None = None
                             ) -> list[dict[str, Any]]:
        """Metadata of every document in the collection, by id."""
        documents: list[dict[str, Any]] = []
        async with aclosing(self.request("librarian", {
                "operation": "list-documents", "streaming": True,
                **scope(user, collection)}, flow=None)) as pages:
            async for page in pages:
                documents += page.get("documents") or []
        return documents

    async def get_document_metadata(self, id: str, user: str | None = None,
                                    collection: str | None = None) -> dict[str, Any]:
        return (await self._librarian("get-document-metadata", document_id=id,
                                      **scope(user, collection)))["document"]

    async def remove_document(self, id: str, user: str | None = None,
                              collection: str | None = None) -> dict[str, Any]:
        """Remove a document and, from the stores, its chunks, vectors and triples
        (that removal runs on the pipeline after this returns); returns what it was."""
        return (await self._librarian("remove-document", document_id=id,
                                      **scope(user, collection)))["document"]

    async def add_processing(self, id: str, flow: str = "default", user: str | None = None,
                             collection: str | None = None) -> dict[str, Any]:
        """Send a stored document down ``flow``'s pipeline; returns the processing record."""
        return (await self._librarian("add-processing", document_id=id, flow=flow,
                                      **scope(user, collection)))["processing"]

    # collections (outside flows)

    async def list_collections(self, tags: Iterable[str] | None = None,
                               user: str | None = None) -> list[dict[str, Any]]:
        """The user's collections, by id: ``{"collection", "name", "description",
        "tags"}``; with ``tags``, those having any of them."""
        return (await self._collections(
            "list-collections", **given(tag_filter=None if tags is None else list(tags),
                                        user=user)))["collections"]

    async def set_collection(self, collection: str, *, name: str | None = None,
                             description: str | None = None,
                             tags: Iterable[str] | None = None,
                             user: str | None = None) -> dict[str, Any]:
        """Name, describe or tag a collection (what is not given stays as it was),
        making it if need be; returns it as stored."""
        return (await self._collections(
            "update-collection", collection=collection, **given(
                name=name, description=description,
                tags=None if tags is None else list(tags), user=user)))["collections"][0]

    async def delete_collection(self, collection: str, user: str | None = None
                                ) -> dict[str, int]:
        """Delete a collection and everything in it from every store; returns what
        each store removed (``documents``, ``chunks``, ``lexical``, ``entities``,
        ``triples``, ``communities``). Deleting it again removes nothing."""
        return (await self._collections("delete-collection", collection=collection,
                                        **given(user=user)))["removed"]

    async def _collections(self, operation: str, **fields: Any) -> dict[str, Any]:
        return await final_response(self.request(
            "collection-management", {"operation": operation, **fields}, flow=None))

    async def _librarian(self, operation: str, **fields: Any) -> dict[str, Any]:
        return await final_response(self.request("librarian", {"operation": operation, **fields},
                                         flow=None))

    # embeddings and the stores' query services (flow services)

    async def embeddings(self, texts: Iterable[str], flow: str = "default"
                         ) -> list[list[float]]:
        """One vector per text, in order."""
        response = await final_response(self.request("embeddings", {"texts": list(texts)}, flow))
        return response["vectors"]

    async def triples(self, s: str | Term | None = None, p: str | Term | None = None,
                      o: str | Term | None = None, limit: int = 10000, *,
                      user: str | None = None, collection: str | None = None,
                      flow: str = "default") -> list[dict[str, Term]]:
        """Triples matching the bound positions (a ``str`` is an IRI; pass
        ``{"t": "l", "v": text}`` for a literal object), at most ``limit``."""
        bound = {name: term(value) for name, value in (("s", s), ("p", p), ("o", o))
                 if value is not None}
        response = await final_response(self.request("triples", {
            **bound, "limit": limit, **scope(user, collection)}, flow))
        return response["response"]

    async def graph_embeddings(self, vector: list[float], limit: int = 10, *,
                               user: str | None = None, collection: str | None = None,
                               flow: str = "default") -> list[dict[str, Any]]:
        """The entities nearest ``vector``, best first: ``{"entity", "score", "label"}``."""
        response = await final_response(self.request("graph-embeddings", {
            "vector": vector, "limit": limit, **scope(user, collection)}, flow))
        return response["entities"]

    async def document_embeddings(self, vector: list[float], limit: int = 10, *,
                                  user: str | None = None, collection: str | None = None,
                                  flow: str = "default") -> list[dict[str, Any]]:
        """The chunks nearest ``vector``, best first: ``{"chunk_id", "text", "score",
        "document_id", "title"}``."""
        response = await final_response(self.request("document-embeddings", {
            "vector": vector, "limit": limit, **scope(user, collection)}, flow))
        return response["chunks"]

    async def knowledge_load(self, triples: Iterable[Any], source: str, *,
                             user: str | None = None, collection: str | None = None,
                             flow: str = "default", batch: int = KNOWLEDGE_BATCH,
                             progress: Callable[[int], object] | None = None
                             ) -> dict[str, int]:
        """Store triples (``{"s", "p", "o"}`` dicts of terms, or ``Triple`` records)
        under document id ``source``, ``batch`` per request; labelled entities get
        vectors. ``progress(n)`` is called after each request with the triples it
        carried. Returns ``{"triples": stored, "entities": sent to embedding}``."""
        totals = {"triples": 0, "entities": 0}
        pending: list[Any] = []

        async def send() -> None:
            response = await final_response(self.request("knowledge-load", {
                "source": source, "triples": pending, **scope(user, collection)}, flow))
            for key in totals:
                totals[key] += response.get(key) or 0
            if progress is not None:
                progress(len(pending))
            pending.clear()

        for triple in triples:
            pending.append(plain(triple))
            if len(pending) >= batch:
                await send()
        if pending:
            await send()
        return totals

    async def load_status(self, ids: Iterable[str], *, user: str | None = None,
                          collection: str | None = None, flow: str = "default",
                          graph: bool = False) -> list[dict[str, Any]]:
        """How far ``flow``'s pipeline has got with each loaded document, in order:
        ``{"id", "state", "version", "chunks"?, "stored", "error"?}`` with ``state``
        unknown | decoding | embedding | done | failed (``chunks``: how many the
        document became; ``stored``: how many of them have their vector stored).
        ``graph``: also, once decoded, ``"triples"`` and ``"entities"`` (chunks whose
        triples / entity vectors are stored) and ``"graph"``: extracting | done."""
        body: dict[str, Any] = {"documents": list(ids), **scope(user, collection)}
        if graph:
            body["graph"] = True
        response = await final_response(self.request("load-status", body, flow))
        return response["documents"]
