"""LazyRAG in the client library: its answers' result (``LazyResult``, read as the
answer's own fields on a ``LazyAnswer``) and its three calls (``LazyRagCalls``:
``lazy_rag``, ``lazy_rag_expand``, ``lazy_rag_status``), which ``AsyncTrustGraph``
has. The result's fields are those lazy-rag's record declares (``result_fields``)."""
from collections.abc import AsyncGenerator, Coroutine
from typing import Any

from ..answers import Done, Reader
from ..schema import LazyRagExpandResponse, LazyRagResponse
from .rag import Answer, RagStream, Result, events_from_frames
from .wire import final_response, given, scope


class LazyResult(Result):
    """What LazyRAG retrieved: ``entities`` (``{"id", "label", "hops", "score",
    "community"?}``), ``relationships`` (``{"s", "p", "o", "text", "document_id",
    "chunk_id"}``), ``communities`` (``{"id", "level", "size", "members",
    "relations"}``), ``confidence`` (0-1), ``missing_info`` (what the graph does not
    cover), ``generation_time_ms``, ``community_cache`` (``"hit"``: the communities
    were cached, ``"miss"``: computed for this question; None: not used), and
    ``summary_error`` (``{"type", "message"}``) when the LLM failed and the answer has
    no text."""

    model = LazyRagResponse


class LazyAnswer(Answer):
    """A lazy-rag ``Answer``: its ``lazy`` result's fields read as its own
    (``.confidence``, ``.missing_info``, ``.entities``, ``.relationships``,
    ``.communities``, ``.generation_time_ms``, ``.community_cache``,
    ``.summary_error``)."""

    result: LazyResult


LazyResult.answer = LazyAnswer


class LazyRagCalls:
    def request(self, service: str, request: dict[str, Any], flow: str | None = "default"
                ) -> AsyncGenerator[dict[str, Any], None]:
        raise NotImplementedError  # AsyncTrustGraph's: over its websocket

    def lazy_rag(self, query: str, *, user: str | None = None, collection: str | None = None,
                 max_hops: int | None = None, max_entities: int | None = None,
                 use_communities: bool | None = None, streaming: bool = False,
                 flow: str = "default") -> Coroutine[Any, Any, Answer] | RagStream:
        """An answer summarised at query time from the part of the graph the question
        touches (LazyRAG). ``await`` it for a ``LazyAnswer`` (an ``Answer`` with
        ``.confidence``, ``.missing_info``, ``.entities``, ``.relationships``,
        ``.communities``; ``.summary_error`` when the LLM failed, the rest still
        there); with ``streaming=True`` iterate it as ``graph_rag``'s, the ``Final``
        event carrying them as ``.lazy``. Options left as ``None`` take the service's
        settings (LAZY_RAG_MAX_HOPS, ...)."""
        request = given(query=query, max_hops=max_hops, max_entities=max_entities,
                        use_communities=use_communities, streaming=streaming,
                        **scope(user, collection))
        stream = RagStream(lambda: events_from_frames(
            self.request("lazy-rag", request, flow), LazyRagResponse))
        return stream if streaming else stream.collect()

    async def lazy_rag_expand(self, query: str, *, user: str | None = None,
                              collection: str | None = None, max_hops: int | None = None,
                              max_entities: int | None = None,
                              use_communities: bool | None = None, flow: str = "default"
                              ) -> LazyResult:
        """LazyRAG's retrieval alone, no LLM: the subgraph and communities the question
        touches, the confidence and what is missing."""
        response = await final_response(self.request("lazy-rag-expand", given(
            query=query, max_hops=max_hops, max_entities=max_entities,
            use_communities=use_communities, **scope(user, collection)), flow))
        [*_, done] = Reader(LazyRagExpandResponse).read(response, True)
        return (LazyResult.of(done.result) if isinstance(done, Done) else None) \
            or LazyResult()

    async def lazy_rag_status(self, *, user: str | None = None, collection: str | None = None,
                              flow: str = "default") -> dict[str, Any]:
        """LazyRAG's settings in force and its community cache: ``{"enabled",
        "max_hops", "max_entities", "use_communities", "summary_model",
        "community_cache": [{"collection", "fresh", "computing", "communities",
        "levels", "entities", "graph_version", "cached_version", ...}]}`` (one entry
        per cached collection of the user, or the one ``collection`` asked about)."""
        response = await final_response(self.request("lazy-rag-status", given(
            collection=collection, **scope(user, None)), flow))
        return {key: value for key, value in response.items() if key != "end_of_stream"}
