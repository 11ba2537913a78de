"""``AsyncTrustGraph``: the client library, async-first.

The transport (``GatewaySocket``) does requests in general; each service below is a
few lines saying what its request holds (built with ``wire``'s helpers) and where its
answer's text is (the answers read by ``trustgraph.answers``, the reader every API
shares). The library and store calls are ``library.py``'s, LazyRAG's
``lazy_rag.py``'s, the flow service's ``flows.py``'s and the traces' ``traces.py``'s,
inherited.
"""
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Coroutine,
    Iterable,
)
from typing import Any, Literal, overload
from urllib.parse import quote

from ..schema import (
    AgentResponse,
    DocumentRagResponse,
    GraphRagResponse,
    LazyRagResponse,
    Response,
    TextCompletionResponse,
)
from .agent import AgentResult, AgentStream
from .agent import events_from_frames as agent_events
from .flows import FlowCalls
from .http import GatewayHttp
from .lazy_rag import LazyRagCalls
from .library import LibraryCalls
from .rag import Answer, RagStream, answer_from, events_from_frames, events_from_lines
from .socket import CONNECT_TIMEOUT, MAX_INFLIGHT, GatewaySocket
from .status import StatusCalls
from .streams import Completion, PromptStream, TextStream
from .traces import TraceCalls
from .wire import final_response, given, scope

DEFAULT_URL = "http://localhost:8888/"
CORE_PATH = "/api/v1/collections/{}/core"  # knowledge cores (REST only)
QUERY_PATH = "/api/v1/query"  # the answer-stream API (REST only)
WHOAMI_PATH = "/api/v1/whoami"
# The answer-stream API's modes: the record each one's service answers with.
QUERY_MODES: dict[str, type[Response]] = {
    "document": DocumentRagResponse, "graph": GraphRagResponse, "lazy": LazyRagResponse,
    "agent": AgentResponse}


class AsyncTrustGraph(LibraryCalls, LazyRagCalls, FlowCalls, TraceCalls, StatusCalls):
    """A connection to a TrustGraph gateway: one websocket for any number of
    concurrent requests, opened on first use and reopened if it drops.

    ``async with AsyncTrustGraph(url, token) as tg: print(await tg.text_completion(s, p))``
    """

    def __init__(self, url: str = DEFAULT_URL, token: str | None = None, *,
                 connect_timeout: float = CONNECT_TIMEOUT,
                 max_inflight: int = MAX_INFLIGHT, traced: bool = False) -> None:
        """``traced``: every request asks the gateway to keep its trace (a gateway
        keeps a share of the others: TG_TRACE_SAMPLE)."""
        self.url = url
        self._socket = GatewaySocket(url, token, connect_timeout=connect_timeout,
                                     max_inflight=max_inflight, traced=traced)
        self._http = GatewayHttp(url, token, connect_timeout=connect_timeout, traced=traced)

    async def __aenter__(self) -> "AsyncTrustGraph":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def connect(self) -> None:
        """Open the socket now (it otherwise opens on the first request), so that an
        unreachable gateway or a refused token is reported here."""
        await self._socket.connection()

    async def close(self) -> None:
        await self._socket.close()
        await self._http.close()

    def request(self, service: str, request: dict[str, Any], flow: str | None = "default"
                ) -> AsyncGenerator[dict[str, Any], None]:
        """Any service: yields its response objects, ending after the complete one.
        ``flow=None`` for services outside flows (librarian, config). Iterate it in
        ``async for``; a caller that keeps the iterator and stops early should
        ``aclose()`` it, which cancels the request."""
        return self._socket.request(service, request, flow)

    # text-completion

    @overload
    def text_completion(self, system: str, prompt: str, streaming: Literal[False] = False,
                        flow: str = "default") -> Coroutine[Any, Any, Completion]: ...

    @overload
    def text_completion(self, system: str, prompt: str, streaming: Literal[True],
                        flow: str = "default") -> TextStream: ...

    def text_completion(self, system: str, prompt: str, streaming: bool = False,
                        flow: str = "default") -> Coroutine[Any, Any, Completion] | TextStream:
        """The LLM's answer. ``await`` it for the text (a ``str`` with ``.usage``); with
        ``streaming=True`` iterate it for text deltas as they arrive, then read
        ``.usage``."""
        stream = TextStream(
            lambda: self.request("text-completion", {
                "system": system, "prompt": prompt, "streaming": streaming}, flow),
            TextCompletionResponse)
        return stream if streaming else stream.collect()

    # prompt

    @overload
    def prompt(self, id: str, variables: dict[str, Any], streaming: Literal[False] = False,
               flow: str = "default") -> Coroutine[Any, Any, Any]: ...

    @overload
    def prompt(self, id: str, variables: dict[str, Any], streaming: Literal[True],
               flow: str = "default") -> PromptStream: ...

    def prompt(self, id: str, variables: dict[str, Any], streaming: bool = False,
               flow: str = "default") -> Coroutine[Any, Any, Any] | PromptStream:
        """Template ``id`` rendered with ``variables`` and answered by the LLM.
        ``await`` it for the answer: a text template's text (a ``str`` with
        ``.usage``), or a JSON template's parsed value. With ``streaming=True`` iterate
        it for text deltas, then read ``.usage`` (and ``.object`` for a JSON template,
        which sends no text)."""
        stream = self.prompt_stream(id, variables, streaming, flow)
        return stream if streaming else stream.answer()

    def prompt_stream(self, id: str, variables: dict[str, Any], streaming: bool = True,
                      flow: str = "default") -> PromptStream:
        """``prompt`` as a ``PromptStream`` whether or not the service streams
        (without streaming, a text template's answer is one delta), for callers that
        want ``.usage`` of a JSON template's answer too."""
        return PromptStream(lambda: self.request("prompt", {
            "id": id, "variables": variables, "streaming": streaming}, flow))

    # RAG: an answer from the user's documents or graph, sources first

    def graph_rag(self, query: str, *, user: str | None = None,
                  collection: str | None = None, entity_limit: int | None = None,
                  triple_limit: int | None = None, max_subgraph_size: int | None = None,
                  max_path_length: int | None = None, optimize_query: bool = False,
                  subqueries: bool = False, streaming: bool = False, flow: str = "default"
                  ) -> Coroutine[Any, Any, Answer] | RagStream:
        """An answer from the knowledge graph. ``await`` it for the ``Answer`` (a
        ``str`` with ``.sources``, ``.usage``, ...); with ``streaming=True`` iterate it
        for ``Metadata`` (sources), ``Chunk`` (text deltas) and ``Final`` events.
        Limits left as ``None`` take the service's defaults."""
        return self._rag("graph-rag", streaming, flow, given(
            query=query, entity_limit=entity_limit, triple_limit=triple_limit,
            max_subgraph_size=max_subgraph_size, max_path_length=max_path_length,
            optimize_query=optimize_query, subqueries=subqueries,
            **scope(user, collection)))

    def document_rag(self, query: str, *, user: str | None = None,
                     collection: str | None = None, doc_limit: int | None = None,
                     optimize_query: bool = False, subqueries: bool = False,
                     streaming: bool = False, flow: str = "default"
                     ) -> Coroutine[Any, Any, Answer] | RagStream:
        """An answer from the nearest document chunks; as ``graph_rag``."""
        return self._rag("document-rag", streaming, flow, given(
            query=query, doc_limit=doc_limit, optimize_query=optimize_query,
            subqueries=subqueries, **scope(user, collection)))

    def _rag(self, service: str, streaming: bool, flow: str, request: dict[str, Any]
             ) -> Coroutine[Any, Any, Answer] | RagStream:
        stream = RagStream(lambda: events_from_frames(self.request(
            service, {**request, "streaming": streaming}, flow)))
        return stream if streaming else stream.collect()

    def query(self, query: str, *, mode: str = "document", stream: bool = False,
              user: str | None = None, collection: str | None = None,
              optimize_query: bool = False, subqueries: bool = False,
              entity_limit: int | None = None, triple_limit: int | None = None,
              max_subgraph_size: int | None = None, max_path_length: int | None = None,
              doc_limit: int | None = None, max_hops: int | None = None,
              max_entities: int | None = None, use_communities: bool | None = None,
              flow: str = "default") -> Coroutine[Any, Any, Answer] | RagStream:
        """The answer-stream API (``POST /api/v1/query``, over HTTP): ``mode``
        ``document``, ``graph``, ``lazy`` or ``agent`` (its answer only: ``agent``
        gives the steps and the session). ``await`` it for the ``Answer`` (a
        ``LazyAnswer`` in mode lazy); with ``stream=True`` iterate it for the same
        events as ``graph_rag`` streams (``Metadata`` also has the ``request_id``)."""
        # The options only RAG modes take are sent only when asked for, so that
        # mode "agent" (which refuses them) can be asked too.
        body = given(query=query, mode=mode, stream=stream, flow=flow,
                     optimize_query=optimize_query or None, subqueries=subqueries or None,
                     entity_limit=entity_limit, triple_limit=triple_limit,
                     max_subgraph_size=max_subgraph_size, max_path_length=max_path_length,
                     doc_limit=doc_limit, max_hops=max_hops, max_entities=max_entities,
                     use_communities=use_communities, **scope(user, collection))
        model = QUERY_MODES.get(mode, DocumentRagResponse)
        if stream:
            return RagStream(lambda: events_from_lines(self._http.lines(QUERY_PATH, body),
                                                       model))
        return self._answer(body, model)

    async def _answer(self, body: dict[str, Any], model: type[Response]) -> Answer:
        return answer_from(await self._http.post(QUERY_PATH, body), model)

    # knowledge cores: a collection as one file (docs/knowledge-cores.md)

    def export_core(self, collection: str, user: str | None = None,
                    flow: str = "default") -> AsyncIterator[bytes]:
        """The collection's knowledge core (a ``.tgz``), its bytes as they arrive."""
        return self._http.download(CORE_PATH.format(quote(collection, safe="")),
                                   given(user=user, flow=flow))

    async def import_core(self, core: AsyncIterable[bytes], collection: str,
                          user: str | None = None, flow: str = "default") -> dict[str, Any]:
        """Store a knowledge core (its bytes, streamed) in the collection; answers
        ``{"manifest", "stored": {part: records}, "into": {"user", "collection"}}`` once
        all is stored."""
        return await self._http.upload(CORE_PATH.format(quote(collection, safe="")),
                                       given(user=user, flow=flow), core)

    # the agent: reasons in steps, calls tools, remembers a session

    def agent(self, question: str, *, user: str | None = None, collection: str | None = None,
              streaming: bool = False, session_id: str | None = None,
              group: Iterable[str] | None = None, pattern: str | None = None,
              max_iterations: int | None = None, state: str | None = None,
              history: list[dict[str, Any]] | None = None, flow: str = "default"
              ) -> Coroutine[Any, Any, AgentResult] | AgentStream:
        """The agent's answer. ``await`` it for the ``AgentResult`` (a ``str`` with
        ``.session_id``, ``.usage``, ``.sources`` and ``.steps``); with
        ``streaming=True`` iterate it for ``AgentThought``, ``AgentAction``,
        ``AgentObservation`` and ``AgentAnswer`` events, then one ``AgentFinal``.
        ``session_id`` continues a conversation (the answer names the one used);
        ``group`` limits the tools; ``pattern`` is ``react`` or ``ask`` (None: the
        service's default)."""
        request = given(question=question, streaming=streaming, session_id=session_id,
                        group=None if group is None else list(group), pattern=pattern,
                        max_iterations=max_iterations, state=state, history=history,
                        **scope(user, collection))
        stream = AgentStream(lambda: agent_events(self.request("agent", request, flow)))
        return stream if streaming else stream.collect()

    # config (global: not part of any flow)

    async def get_config(self) -> tuple[dict[str, dict[str, Any]], int]:
        """Everything: ``({type: {key: value}}, version)``."""
        response = await self._config({"operation": "config"})
        return response.get("config") or {}, response["version"]

    async def config_keys(self, type: str) -> list[str]:
        """The keys of one type, sorted."""
        return (await self._config({"operation": "list", "type": type}))["directory"]

    async def config_item(self, type: str, key: str) -> Any:
        """One item's value; an item that is not there is ``not-found``."""
        response = await self._config({"operation": "get",
                                       "keys": [{"type": type, "key": key}]})
        return response["values"][0].get("value")

    async def config_values(self, type: str) -> dict[str, Any]:
        """Every item of one type: ``{key: value}``."""
        response = await self._config({"operation": "getvalues", "type": type})
        return {item["key"]: item.get("value") for item in response.get("values") or []}

    async def put_config(self, values: dict[str, dict[str, Any]],
                         value_format: Literal["json", "text"] = "json") -> int:
        """Store ``{type: {key: value}}`` in one change; returns the new version.
        ``value_format="text"``: each value is text, stored as TrustGraph's tools put
        it (text that is JSON as that JSON value, other text as a string)."""
        items = [{"type": type, "key": key, "value": value}
                 for type, entries in values.items() for key, value in entries.items()]
        return (await self._config({"operation": "put", "values": items,
                                    "value_format": value_format}))["version"]

    async def delete_config(self, keys: Iterable[tuple[str, str]]) -> int:
        """Delete ``(type, key)`` items in one change (all or, if one is missing,
        none: ``not-found``); returns the new version."""
        items = [{"type": type, "key": key} for type, key in keys]
        return (await self._config({"operation": "delete", "keys": items}))["version"]

    async def _config(self, request: dict[str, Any]) -> dict[str, Any]:
        return await final_response(self.request("config", request, flow=None))

    # who is asking, and (admins) users and their keys

    async def whoami(self) -> dict[str, Any]:
        """Who the gateway takes this client to be: ``{"user", "role", "key_id", "via"}``
        (``via``: key, jwt, token or open)."""
        return await self._http.get(WHOAMI_PATH)

    async def add_user(self, user: str) -> dict[str, Any]:
        return (await self._keys("add-user", owner=user))["users"][0]

    async def create_key(self, user: str, role: str = "user", *, name: str = "",
                         expires: float | None = None, limits: dict[str, int] | None = None
                         ) -> dict[str, Any]:
        """A new key for ``user``: ``{"key": {id, user, role, ...}, "secret": "tg_..."}``;
        the secret is shown this once. ``expires``: Unix seconds; ``limits``:
        ``concurrent``, ``per_minute``, ``tokens_per_day``."""
        return await self._keys("create-key", owner=user, role=role, name=name,
                                **given(expires=expires, limits=limits))

    async def list_keys(self, user: str | None = None) -> list[dict[str, Any]]:
        return (await self._keys("list-keys", **given(owner=user)))["keys"]

    async def revoke_key(self, key_id: str) -> dict[str, Any]:
        return (await self._keys("revoke-key", key_id=key_id))["key"]

    async def _keys(self, operation: str, **fields: Any) -> dict[str, Any]:
        return await final_response(self.request("keys", {"operation": operation, **fields},
                                                  flow=None))
