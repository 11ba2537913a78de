"""The answer-stream API's lines and collected answers (``/api/v1/query``), as models
for the OpenAPI document (a unit test holds the lines ``query.py`` writes to these
models, so the two cannot drift apart)."""
from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue

from trustgraph.schema import Error, LazyCommunity, LazyEntity, LazyRelationship, Source


class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UsageLine(_Line):
    in_token: int | None
    out_token: int | None
    model: str | None


class MetadataLine(_Line):
    type: Literal["metadata"]
    sources: list[Source]
    optimized_query: str | None
    subqueries: list[str]
    request_id: str


class ProgressLine(_Line):
    type: Literal["progress"]
    message: str


class ContentLine(_Line):
    type: Literal["content"]
    delta: str


StepKind = Literal["thought", "action", "observation"]


class StepLine(_Line):
    """Mode agent: a piece of a thought or observation, or an action (with its tool
    and arguments), before and between the answer's content lines."""

    type: Literal["step"]
    chunk_type: StepKind
    delta: str
    tool: str | None = None
    arguments: dict[str, JsonValue] | None = None


class DoneLine(_Line):
    type: Literal["done"]
    usage: UsageLine
    session_id: str | None = None  # mode agent: the conversation, to continue it


class LazySubgraph(_Line):
    """LazyRAG's retrieval: the subgraph, its communities, the confidence that it
    answers the question and what it leaves out."""

    entities: list[LazyEntity] | None
    relationships: list[LazyRelationship] | None
    communities: list[LazyCommunity] | None
    confidence: float | None
    missing_info: list[str] | None
    generation_time_ms: float | None
    community_cache: Literal["hit", "miss"] | None  # null: communities not used


class LazyResult(LazySubgraph):
    """What a lazy-mode answer adds to ``done`` and to the collected answer: the
    subgraph it was written from and, when the LLM failed, ``summary_error`` in place
    of the answer's text."""

    summary_error: Error | None


class LazyDoneLine(DoneLine, LazyResult):
    pass


class ErrorLine(_Line):
    type: Literal["error"]
    message: str
    error_type: str


class CollectedAnswer(_Line):
    response: str
    sources: list[Source]
    optimized_query: str | None
    subqueries: list[str]
    request_id: str
    usage: UsageLine


class LazyCollectedAnswer(CollectedAnswer, LazyResult):
    pass


class AgentStep(_Line):
    chunk_type: StepKind
    content: str
    tool: str | None = None
    arguments: dict[str, JsonValue] | None = None


class CollectedAgentAnswer(_Line):
    """Mode agent, ``stream: false``: the answer, and the steps that led to it."""

    response: str
    steps: list[AgentStep]
    sources: list[Source]
    request_id: str
    session_id: str | None
    usage: UsageLine
