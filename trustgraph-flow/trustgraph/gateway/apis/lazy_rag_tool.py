"""LazyRAG's MCP tool, ``lazy_summary``: what the knowledge graph says about a
question, summarised now, with how confident it is and what the graph does not
cover (an entry of ``mcp_tools.TOOLS``). When the summary's LLM call fails, the rest
is still the tool's answer."""
from typing import Any

from pydantic import Field

from trustgraph.schema import Source

from .mcp_tool import COLLECTION, Arguments, Call, Result, Tool, UsageResult, collection


class LazyArguments(Arguments):
    question: str = Field(min_length=1, max_length=10_000, description="the question")
    collection: str | None = COLLECTION
    max_hops: int | None = Field(None, ge=1, le=5, description="how far from the entities "
                                                               "the question names to look")


class LazyResult(Result):
    summary: str | None = None  # None when the LLM failed (summary_error says why)
    summary_error: str | None = None
    confidence: float | None = None  # 0-1: how much of the question the graph covers
    missing_info: list[str] = []  # what the graph does not say
    entities: list[str] = []
    relationships: list[str] = []
    sources: list[Source] = []
    usage: UsageResult = UsageResult()


async def lazy_tool(call: Call, arguments: LazyArguments) -> tuple[str, LazyResult]:
    request: dict[str, Any] = {"query": arguments.question, **collection(arguments.collection)}
    if arguments.max_hops is not None:
        request["max_hops"] = arguments.max_hops
    await call.progress("expanding the graph around the question's entities")
    whole = await call.answered("lazy-rag", request)
    got, error = whole.result, whole.failure
    result = LazyResult(
        summary=None if error else whole.text,
        summary_error=f"{error.type}: {error.message}" if error else None,
        confidence=got.get("confidence"), missing_info=got.get("missing_info") or [],
        entities=[entity.get("label") or entity["id"] for entity in got.get("entities") or ()],
        relationships=[relation.get("text") or "" for relation in got.get("relationships") or ()],
        sources=whole.sources or [], usage=UsageResult.of(whole.usage))
    missing = "".join(f"\n- {item}" for item in result.missing_info)
    text = (result.summary or f"(no summary: {result.summary_error})") + (
        f"\n\nConfidence: {result.confidence:.2f}" if result.confidence is not None else "") + (
        f"\nNot in the graph:{missing}" if missing else "")
    return text, result


LAZY_SUMMARY = Tool(
    "lazy_summary", "Summarise what the knowledge graph says about a question, now, with how "
    "confident it is and what the graph does not cover.", LazyArguments, LazyResult,
    lazy_tool, "lazy-rag")
