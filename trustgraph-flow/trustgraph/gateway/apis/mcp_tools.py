"""The MCP server's tools: each is a name, a description, its arguments and its result
as models (their JSON schemas are the tool's input and output schemas), the least
role that may use it, and what it asks of the services (through ``asking``, on
behalf of the caller).

A tool answers with text for the model to read (the answer, numbered passages, the
triples) and the same as structured content. Its failure (a service's error, a bad
argument, a timeout) is a result with ``isError``, saying why, so the host's model
can see it and try again.
"""
import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from trustgraph.base import ServiceError
from trustgraph.schema import LIBRARIAN_FLOW, CollectionInfo, Error, Role, Source

from ..core import Caller, Dispatcher, GatewayError, allowed
from .asking import answer, ask
from .openai_answers import citations
from .query import MODES, AnswerLines, result_fields

Mode = Literal["document", "graph", "lazy", "agent"]


@dataclass(frozen=True)
class Call:
    """What a tool works with: the services, on behalf of whom, on which flow, and
    how to tell the host how it is getting on."""

    client: Dispatcher
    caller: Caller
    flow: str
    progress: Callable[[str], Awaitable[None]]


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Result(BaseModel):
    pass


COLLECTION = Field(None, min_length=1, description="the collection to use (default: "
                                                   "'default'); list_collections names them")


class UsageResult(_Result):
    in_token: int | None = None
    out_token: int | None = None
    model: str | None = None


# --- ask ------------------------------------------------------------------------------

class AskArguments(_Arguments):
    question: str = Field(min_length=1, description="the question, self-contained")
    mode: Mode = Field("document", description=(
        "document: from passages of the documents; graph: from the knowledge graph; "
        "lazy: from the part of the graph the question touches, summarised now; agent: "
        "an agent that reasons and uses both"))
    collection: str | None = COLLECTION


class AskResult(_Result):
    answer: str
    sources: list[Source] = []
    usage: UsageResult = UsageResult()
    session_id: str | None = None  # mode agent: the conversation it kept


async def ask_tool(call: Call, arguments: AskArguments) -> tuple[str, AskResult]:
    mode = MODES[arguments.mode]
    collected = await _collected(call, arguments.mode, {
        mode.question: arguments.question, "progress": True,
        **_collection(arguments.collection)})
    if collected.get("summary_error"):  # LazyRAG: the subgraph, but no answer
        raise ServiceError(Error.model_validate(collected["summary_error"]))
    result = AskResult(answer=collected["response"], sources=collected["sources"],
                       usage=UsageResult(**collected["usage"]),
                       session_id=collected.get("session_id"))
    return result.answer + citations(collected["sources"]), result


# --- search -----------------------------------------------------------------------------

class SearchArguments(_Arguments):
    query: str = Field(min_length=1, description="what to look for, in words")
    collection: str | None = COLLECTION
    limit: int = Field(10, ge=1, le=50, description="how many passages at most")


class Passage(_Result):
    citation: int  # its number, as [n] in the text
    text: str
    score: float  # cosine similarity to the query: higher is nearer
    document_id: str
    title: str = ""
    chunk_id: str
    page_range: list[int] | None = None
    header_titles: list[str] | None = None


class SearchResult(_Result):
    passages: list[Passage]


async def search_tool(call: Call, arguments: SearchArguments) -> tuple[str, SearchResult]:
    await call.progress("embedding the query")
    vector = (await _answer(call, "embeddings", {"texts": [arguments.query]}))["vectors"][0]
    await call.progress("searching the documents")
    found = await _answer(call, "document-embeddings", {
        "vector": vector, "limit": arguments.limit, **_collection(arguments.collection)})
    passages = [Passage(citation=n, text=chunk["text"], score=chunk["score"],
                        document_id=chunk.get("document_id") or "",
                        title=chunk.get("title") or "", chunk_id=chunk["chunk_id"],
                        page_range=chunk.get("page_range"),
                        header_titles=chunk.get("header_titles"))
                for n, chunk in enumerate(found.get("chunks") or (), 1)]
    text = "\n\n".join(f"[{p.citation}] {_cited(p)} (score {p.score:.2f})\n{p.text}"
                       for p in passages) or "nothing in this collection matches the query"
    return text, SearchResult(passages=passages)


def _cited(passage: Passage) -> str:
    where = passage.title or passage.document_id
    if passage.page_range:
        first, last = passage.page_range[0], passage.page_range[-1]
        where += f", p. {first}" if first == last else f", pp. {first}-{last}"
    return where


# --- graph_neighbourhood ---------------------------------------------------------------

class NeighbourhoodArguments(_Arguments):
    entity: str = Field(min_length=1, description=(
        "the entity: its name (the nearest entity of the graph is used) or its IRI"))
    collection: str | None = COLLECTION
    hops: int = Field(1, ge=1, le=3, description="how far from the entity to follow")
    limit: int = Field(50, ge=1, le=500, description="how many triples at most")


class Entity(_Result):
    iri: str
    label: str = ""
    score: float | None = None  # how near its name is to the one asked for (by name only)


class Statement(_Result):
    subject: str
    predicate: str
    object: str
    document_id: str = ""
    chunk_id: str = ""


class NeighbourhoodResult(_Result):
    entity: Entity
    triples: list[Statement]


IRI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$")


async def neighbourhood_tool(call: Call, arguments: NeighbourhoodArguments
                             ) -> tuple[str, NeighbourhoodResult]:
    entity = await _entity(call, arguments)
    await call.progress(f"expanding the graph around {entity.label or entity.iri}")
    found = await _answer(call, "subgraph", {
        "seeds": [{"t": "i", "i": entity.iri}], "max_path_length": arguments.hops,
        "max_subgraph_size": arguments.limit, **_collection(arguments.collection)})
    labels: dict[str, str] = found.get("labels") or {}
    entity.label = entity.label or labels.get(entity.iri, "")
    triples = [Statement(**{part: _shown(evidence["triple"][key], labels) for part, key in (
        ("subject", "s"), ("predicate", "p"), ("object", "o"))},
        document_id=evidence.get("document_id") or "", chunk_id=evidence.get("chunk_id") or "")
        for evidence in found.get("triples") or ()]
    text = "\n".join(f"{t.subject} — {t.predicate} — {t.object}" for t in triples)
    return (f"{entity.label or entity.iri} <{entity.iri}>\n{text or '(no triples)'}",
            NeighbourhoodResult(entity=entity, triples=triples))


async def _entity(call: Call, arguments: NeighbourhoodArguments) -> Entity:
    if IRI.match(arguments.entity):
        return Entity(iri=arguments.entity)
    await call.progress(f"finding the entity {arguments.entity!r}")
    vector = (await _answer(call, "embeddings", {"texts": [arguments.entity]}))["vectors"][0]
    found = await _answer(call, "graph-embeddings", {
        "vector": vector, "limit": 1, **_collection(arguments.collection)})
    for match in found.get("entities") or ():
        if match["entity"].get("t") == "i":
            return Entity(iri=match["entity"]["i"], label=match.get("label") or "",
                          score=match.get("score"))
    raise GatewayError("not-found", f"no entity of the collection's graph matches "
                                    f"{arguments.entity!r}", 404)


def _shown(term: dict[str, Any], labels: dict[str, str]) -> str:
    if term.get("t") == "i":
        return labels.get(term["i"]) or term["i"]
    return term.get("v") or ""


# --- lazy_summary ----------------------------------------------------------------------

class LazyArguments(_Arguments):
    question: str = Field(min_length=1, max_length=10_000, description="the question")
    collection: str | None = COLLECTION
    max_hops: int | None = Field(None, ge=1, le=5, description="how far from the entities "
                                                               "the question names to look")


class LazyResult(_Result):
    summary: str | None = None  # None when the LLM failed (summary_error says why)
    summary_error: str | None = None
    confidence: float | None = None  # 0-1: how much of the question the graph covers
    missing_info: list[str] = []  # what the graph does not say
    entities: list[str] = []
    relationships: list[str] = []
    sources: list[Source] = []
    usage: UsageResult = UsageResult()


async def lazy_tool(call: Call, arguments: LazyArguments) -> tuple[str, LazyResult]:
    request: dict[str, Any] = {"query": arguments.question,
                               **_collection(arguments.collection)}
    if arguments.max_hops is not None:
        request["max_hops"] = arguments.max_hops
    await call.progress("expanding the graph around the question's entities")
    got = await _collected(call, "lazy", request)
    error = got.get("summary_error")
    result = LazyResult(
        summary=None if error else got["response"],
        summary_error=f"{error['type']}: {error['message']}" if error else None,
        confidence=got.get("confidence"), missing_info=got.get("missing_info") or [],
        entities=[entity.get("label") or entity["id"] for entity in got.get("entities") or ()],
        relationships=[relation.get("text") or "" for relation in got.get("relationships") or ()],
        sources=got["sources"], usage=UsageResult(**got["usage"]))
    missing = "".join(f"\n- {item}" for item in result.missing_info)
    text = (result.summary or f"(no summary: {result.summary_error})") + (
        f"\n\nConfidence: {result.confidence:.2f}" if result.confidence is not None else "") + (
        f"\nNot in the graph:{missing}" if missing else "")
    return text, result


# --- list_collections, load_text ----------------------------------------------------------

class NoArguments(_Arguments):
    pass


class CollectionsResult(_Result):
    collections: list[CollectionInfo]


async def collections_tool(call: Call, arguments: NoArguments
                           ) -> tuple[str, CollectionsResult]:
    final = await answer(call.client, call.caller, "librarian", LIBRARIAN_FLOW,
                         {"operation": "list-collections"})
    result = CollectionsResult(collections=final.get("collections") or [])
    return "\n".join(f"{c.collection} ({c.documents} documents)"
                     for c in result.collections) or "no collections yet", result


class LoadArguments(_Arguments):
    text: str = Field(min_length=1, description="the document's text (Markdown or plain)")
    title: str = Field("", description="its title")
    collection: str | None = COLLECTION
    id: str | None = Field(None, min_length=1, max_length=200, description=(
        "the document's id (default: one made from the text, so loading the same text "
        "again replaces it)"))


class LoadResult(_Result):
    id: str
    collection: str
    title: str = ""


async def load_tool(call: Call, arguments: LoadArguments) -> tuple[str, LoadResult]:
    document = arguments.id or "mcp-" + hashlib.sha256(arguments.text.encode()).hexdigest()[:16]
    collection = arguments.collection or "default"
    await _answer(call, "text-load", {"id": document, "collection": collection,
                                      "title": arguments.title, "text": arguments.text})
    return (f"loaded {document!r} into {collection!r}; it is searchable once processed",
            LoadResult(id=document, collection=collection, title=arguments.title))


# --- the table --------------------------------------------------------------------------

@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    arguments: type[_Arguments]
    result: type[_Result]
    run: Callable[[Call, Any], Awaitable[tuple[str, _Result]]]
    # The service (and operation) a caller's role must reach to be offered the tool
    # (the role table, core/access.py): the one it writes with, or reads the most by.
    service: str
    operation: str | None = None

    @property
    def read_only(self) -> bool:
        """Offered to a reader: reads and asks only."""
        return reaches("reader", self)


TOOLS: tuple[Tool, ...] = (
    Tool("ask", "Answer a question from the knowledge base, with the sources the answer "
         "rests on.", AskArguments, AskResult, ask_tool, "document-rag"),
    Tool("search", "Find the passages of the documents nearest to a query, numbered for "
         "citation, with their document, title and pages.", SearchArguments, SearchResult,
         search_tool, "document-embeddings"),
    Tool("graph_neighbourhood", "The knowledge graph's triples around an entity (named, or "
         "by IRI), with the documents they were extracted from.", NeighbourhoodArguments,
         NeighbourhoodResult, neighbourhood_tool, "subgraph"),
    Tool("lazy_summary", "Summarise what the knowledge graph says about a question, now, "
         "with how confident it is and what the graph does not cover.", LazyArguments,
         LazyResult, lazy_tool, "lazy-rag"),
    Tool("list_collections", "The collections of documents there are, with how many "
         "documents each has.", NoArguments, CollectionsResult, collections_tool, "librarian",
         "list-collections"),
    Tool("load_text", "Add a text document to a collection (it is split, embedded and "
         "its knowledge extracted in the background).", LoadArguments, LoadResult,
         load_tool, "text-load"),
)


def reaches(role: Role | None, tool: Tool) -> bool:
    """Whether ``role`` may use what ``tool`` needs."""
    reached = allowed(role)
    if tool.service not in reached:
        return False
    operations = reached[tool.service]
    return operations is None or tool.operation in operations


def offered(caller: Caller) -> list[Tool]:
    """The tools ``caller`` is offered, and may call: those its role reaches."""
    return [tool for tool in TOOLS if reaches(caller.role, tool)]


def _collection(collection: str | None) -> dict[str, str]:
    return {"collection": collection} if collection else {}


async def _collected(call: Call, mode: str, request: dict[str, Any]) -> dict[str, Any]:
    """The answer of ``mode``'s service (as the answer-stream API collects it), told
    to the host as it comes: what retrieval is doing, the agent's actions, the text."""
    service = MODES[mode].service
    lines: AnswerLines = MODES[mode].lines("", result_fields(call.client.resolve(
        service, call.flow)))
    frames = ask(call.client, call.caller, service, call.flow, {**request, "streaming": True})
    async with aclosing(frames) as batches:
        async for batch in batches:
            told = len(lines.parts)
            for data, final in batch:
                record = json.loads(data)
                lines.lines(record, final)  # raises the service's error
                if news := _news(record):
                    await call.progress(news)
            if len(lines.parts) > told:  # the answer's text that just came
                await call.progress("".join(lines.parts[told:]))
    return lines.collected()


def _news(record: dict[str, Any]) -> str | None:
    """What a record says the service is doing, beyond the answer's text."""
    if record.get("message_type") == "progress":
        return record.get("progress")
    if record.get("chunk_type") == "action":
        return f"using {record.get('tool') or record.get('content')}"
    return None


async def _answer(call: Call, service: str, request: dict[str, Any]) -> dict[str, Any]:
    return await answer(call.client, call.caller, service, call.flow, request)
