"""Agent service records (PROTOCOL §2 "agent", DESIGN §4).

A dialog is a stream of frames, each with ``chunk_type`` (and ``message_type``, the same
value, for clients that read either) ∈ thought | action | observation | answer | error,
``content``, ``end_of_message`` (this thought/observation/answer is complete) and
``end_of_dialog`` (the whole interaction is complete). The last frame has
``end_of_dialog`` true and the token totals of every LLM call of the dialog. Without
``streaming`` the dialog is one frame: the answer, both end flags true.
"""
from typing import Literal, Self

from pydantic import Field, JsonValue, model_validator

from .pipeline import DEFAULT_COLLECTION, DEFAULT_USER
from .record import Error, Record, Response
from .retrieval import Source

MAX_QUESTION_CHARS = 20_000
MAX_ITERATIONS = 50

ChunkType = Literal["thought", "action", "observation", "answer", "error"]
Pattern = Literal["react", "ask"]
Route = Literal["knowledge", "code", "conversational"]


class AgentStep(Record):
    """One earlier ReAct step, sent back by a client to continue a dialog."""

    thought: str = ""
    action: str = ""
    arguments: dict[str, JsonValue] = Field(default_factory=dict)
    observation: str = ""


class AgentRequest(Record):
    question: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS)
    user: str = Field(DEFAULT_USER, min_length=1)
    collection: str = Field(DEFAULT_COLLECTION, min_length=1)
    streaming: bool = False
    # Conversation memory kept by the service, per user; generated when absent.
    session_id: str | None = Field(None, min_length=1, max_length=200)
    group: list[str] | None = None  # only tools in one of these groups
    # TrustGraph clients send it (their tools' states); accepted so they stay valid,
    # not used: tools here are chosen by ``group``.
    state: str | None = None
    history: list[AgentStep] | None = None  # react: steps already taken in this dialog
    pattern: Pattern | None = None  # absent: the service's default
    max_iterations: int | None = Field(None, ge=1, le=MAX_ITERATIONS)


class AgentResponse(Response):
    delta_field = "content"
    delta_kinds = ("chunk_type", "message_type")
    run_fields = ("chunk_type",)
    run_end = "end_of_message"
    step_kinds = frozenset(("thought", "action", "observation"))
    error_kinds = {"error": "agent-error"}  # an error frame, even one without ``error``
    end_field = "end_of_dialog"

    chunk_type: ChunkType | None = None
    message_type: ChunkType | None = None  # always equal to chunk_type
    content: str = ""
    end_of_message: bool = False
    end_of_dialog: bool = False
    tool: str | None = None  # action frames: the tool's name
    arguments: dict[str, JsonValue] | None = None  # action frames: what it is called with
    route: Route | None = None  # ask: the route, on its thought frame
    sources: list[Source] | None = None  # ask: the evidence, before the first answer token
    session_id: str | None = None
    in_token: int | None = None
    out_token: int | None = None
    model: str | None = None

    @model_validator(mode="after")
    def _same_type_twice(self) -> Self:
        # A reader may send either spelling; the record always carries both. Readers
        # that know only the generic ``end_of_stream`` see the dialog's end there too.
        kind = self.chunk_type or self.message_type
        self.chunk_type = self.message_type = kind
        self.end_of_dialog = self.end_of_stream = self.end_of_dialog or self.end_of_stream
        return self

    def is_final(self) -> bool:
        return self.end_of_dialog

    @classmethod
    def failure(cls, error: Error) -> Self:
        return cls(chunk_type="error", content=error.message, error=error,
                   end_of_message=True, end_of_dialog=True)
