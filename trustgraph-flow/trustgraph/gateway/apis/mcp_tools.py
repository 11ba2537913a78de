"""The MCP server's tools (``TOOLS``; what a tool is: ``mcp_tool.Tool``): each is a
name, a description, its arguments and its result as models (their JSON schemas are
the tool's input and output schemas), the least role that may use it, and what it
asks of the services (through ``mcp_tool.Call``, on behalf of the caller).

A tool answers with text for the model to read (the answer, numbered passages, the
triples) and the same as structured content. Its failure (a service's error, a bad
argument, a timeout) is a result with ``isError``, saying why, so the host's model
can see it and try again.
"""
import hashlib
import re
from typing import Any, Literal

from pydantic import Field

from trustgraph.schema import LIBRARIAN_FLOW, CollectionInfo, Source

from ..core import Caller, GatewayError
from .asking import answer
from .lazy_rag_tool import LAZY_SUMMARY
from .mcp_tool import COLLECTION, Arguments, Call, Result, Tool, UsageResult, collection, reaches
from .openai_answers import citations
from .query import MODES, flow_mode

Mode = Literal["document", "graph", "lazy", "agent"]


# --- ask ------------------------------------------------------------------------------

class AskArguments(Arguments):
    question: str = Field(min_length=1, description="the question, self-contained")
    mode: Mode = Field("document", description=(
        "document: from passages of the documents; graph: from the knowledge graph; "
        "lazy: from the part of the graph the question touches, summarised now; agent: "
        "an agent that reasons and uses both (default: the flow's, else document)"))
    collection: str | None = COLLECTION


class AskResult(Result):
    answer: str
    sources: list[Source] = []
    usage: UsageResult = UsageResult()
    session_id: str | None = None  # mode agent: the conversation it kept


async def ask_tool(call: Call, arguments: AskArguments) -> tuple[str, AskResult]:
    given = "mode" in arguments.model_fields_set
    mode = MODES[arguments.mode if given else flow_mode(call.client, call.flow)]
    # Only the text is the answer here: one whose text failed is a failure.
    whole = await call.answered(mode.service, {
        mode.question: arguments.question, "progress": True,
        **collection(arguments.collection)}, text_only=True)
    result = AskResult(answer=whole.text, sources=whole.sources or [],
                       usage=UsageResult.of(whole.usage), session_id=whole.session_id)
    return result.answer + citations(whole.sources or []), result


# --- search -----------------------------------------------------------------------------

class SearchArguments(Arguments):
    query: str = Field(min_length=1, description="what to look for, in words")
    collection: str | None = COLLECTION
    limit: int = Field(10, ge=1, le=50, description="how many passages at most")


class Passage(Result):
    citation: int  # its number, as [n] in the text
    text: str
    score: float  # cosine similarity to the query: higher is nearer
    document_id: str
    title: str = ""
    chunk_id: str
    page_range: list[int] | None = None
    header_titles: list[str] | None = None


class SearchResult(Result):
    passages: list[Passage]


async def search_tool(call: Call, arguments: SearchArguments) -> tuple[str, SearchResult]:
    await call.progress("embedding the query")
    vector = (await call.final("embeddings", {"texts": [arguments.query]}))["vectors"][0]
    await call.progress("searching the documents")
    found = await call.final("document-embeddings", {
        "vector": vector, "limit": arguments.limit, **collection(arguments.collection)})
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

class NeighbourhoodArguments(Arguments):
    entity: str = Field(min_length=1, description=(
        "the entity: its name (the nearest entity of the graph is used) or its IRI"))
    collection: str | None = COLLECTION
    hops: int = Field(1, ge=1, le=3, description="how far from the entity to follow")
    limit: int = Field(50, ge=1, le=500, description="how many triples at most")


class Entity(Result):
    iri: str
    label: str = ""
    score: float | None = None  # how near its name is to the one asked for (by name only)


class Statement(Result):
    subject: str
    predicate: str
    object: str
    document_id: str = ""
    chunk_id: str = ""


class NeighbourhoodResult(Result):
    entity: Entity
    triples: list[Statement]


IRI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$")


async def neighbourhood_tool(call: Call, arguments: NeighbourhoodArguments
                             ) -> tuple[str, NeighbourhoodResult]:
    entity = await _entity(call, arguments)
    await call.progress(f"expanding the graph around {entity.label or entity.iri}")
    found = await call.final("subgraph", {
        "seeds": [{"t": "i", "i": entity.iri}], "max_path_length": arguments.hops,
        "max_subgraph_size": arguments.limit, **collection(arguments.collection)})
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
    vector = (await call.final("embeddings", {"texts": [arguments.entity]}))["vectors"][0]
    found = await call.final("graph-embeddings", {
        "vector": vector, "limit": 1, **collection(arguments.collection)})
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


# --- list_collections, load_text ----------------------------------------------------------

class NoArguments(Arguments):
    pass


class CollectionsResult(Result):
    collections: list[CollectionInfo]


async def collections_tool(call: Call, arguments: NoArguments
                           ) -> tuple[str, CollectionsResult]:
    final = await answer(call.client, call.caller, "librarian", LIBRARIAN_FLOW,
                         {"operation": "list-collections"})
    result = CollectionsResult(collections=final.get("collections") or [])
    return "\n".join(f"{c.collection} ({c.documents} documents)"
                     for c in result.collections) or "no collections yet", result


class LoadArguments(Arguments):
    text: str = Field(min_length=1, description="the document's text (Markdown or plain)")
    title: str = Field("", description="its title")
    collection: str | None = COLLECTION
    id: str | None = Field(None, min_length=1, max_length=200, description=(
        "the document's id (default: one made from the text, so loading the same text "
        "again replaces it)"))


class LoadResult(Result):
    id: str
    collection: str
    title: str = ""


async def load_tool(call: Call, arguments: LoadArguments) -> tuple[str, LoadResult]:
    document = arguments.id or "mcp-" + hashlib.sha256(arguments.text.encode()).hexdigest()[:16]
    into = arguments.collection or "default"
    await call.final("text-load", {"id": document, "collection": into,
                                   "title": arguments.title, "text": arguments.text})
    return (f"loaded {document!r} into {into!r}; it is searchable once processed",
            LoadResult(id=document, collection=into, title=arguments.title))


# --- the table --------------------------------------------------------------------------

TOOLS: tuple[Tool, ...] = (
    Tool("ask", "Answer a question from the knowledge base, with the sources the answer "
         "rests on.", AskArguments, AskResult, ask_tool, "document-rag"),
    Tool("search", "Find the passages of the documents nearest to a query, numbered for "
         "citation, with their document, title and pages.", SearchArguments, SearchResult,
         search_tool, "document-embeddings"),
    Tool("graph_neighbourhood", "The knowledge graph's triples around an entity (named, or "
         "by IRI), with the documents they were extracted from.", NeighbourhoodArguments,
         NeighbourhoodResult, neighbourhood_tool, "subgraph"),
    LAZY_SUMMARY,
    Tool("list_collections", "The collections of documents there are, with how many "
         "documents each has.", NoArguments, CollectionsResult, collections_tool, "librarian",
         "list-collections"),
    Tool("load_text", "Add a text document to a collection (it is split, embedded and "
         "its knowledge extracted in the background).", LoadArguments, LoadResult,
         load_tool, "text-load"),
)


def offered(caller: Caller) -> list[Tool]:
    """The tools ``caller`` is offered, and may call: those its role reaches."""
    return [tool for tool in TOOLS if reaches(caller.role, tool)]
