"""The base of every record on the bus and on the gateway wire.

One codec: ``encode`` / ``decode`` below. Readers ignore unknown fields and fill
missing ones with defaults, so old and new processors interoperate. Request fields
are accepted hyphenated or underscored (``entity-limit`` / ``entity_limit``);
records are always written with their snake_case names, leaving out unset optionals.
"""
from typing import Any, ClassVar, Self, TypeVar

from pydantic import AliasChoices, AliasGenerator, BaseModel, ConfigDict


def _both_spellings(name: str) -> AliasChoices:
    return AliasChoices(name, name.replace("_", "-"))


class Record(BaseModel):
    model_config = ConfigDict(
        extra="ignore",
        populate_by_name=True,
        alias_generator=AliasGenerator(validation_alias=_both_spellings),
    )

    def encoded(self) -> bytes:
        """This record as the bus carries it (``encode``). A record whose sender
        already holds it encoded returns those bytes instead (``GraphEdgesResponse``)."""
        return self.model_dump_json(exclude_none=True).encode()


R = TypeVar("R", bound=Record)


def encode(record: Record) -> bytes:
    return record.encoded()


def decode(model: type[R], data: bytes | str) -> R:
    return model.model_validate_json(data)


class Error(Record):
    type: str
    message: str


class Response(Record):
    """A response record: knows when it ends its stream, how to carry an error, where
    the gateway's wire shows it otherwise than the bus carries it (a record that
    declares nothing here is passed on as its bytes, never decoded) and, for a service
    that streams text, where a delta's text goes.

    The class-level declarations below are read by ``trustgraph.base.relay`` (which
    passes deltas on, and joins those waiting together), by the gateway and by the
    answer reader (``trustgraph.answers``); they are not fields and never travel.
    """

    # The field a streamed delta's text travels in; None: the service streams no text.
    delta_field: ClassVar[str | None] = None
    # What every delta record says besides its text (RAG: ``message_type`` "chunk").
    delta_marks: ClassVar[dict[str, Any]] = {}
    # Where a delta's kind goes, for a record that streams several kinds of text (the
    # agent: a thought or an answer, in ``chunk_type`` and ``message_type``).
    delta_kinds: ClassVar[tuple[str, ...]] = ()
    # Deltas waiting together merge only with neighbours equal in these fields (the
    # agent: ``chunk_type``, so a thought never runs into the answer after it) ...
    run_fields: ClassVar[tuple[str, ...]] = ()
    # ... and never one with this flag set: it ends its message and stands alone (the
    # agent: ``end_of_message``, so a client still sees where each thought ends).
    run_end: ClassVar[str | None] = None

    # How an answer's records read as events (``trustgraph.answers.Reader``, which
    # every API renders from):
    # the field a record that is no delta carries the whole answer's text in (RAG: a
    # non-streaming answer's ``response``; its deltas carry ``delta_marks``);
    whole_field: ClassVar[str | None] = None
    # what the first record always says, with the value shown when the service left
    # it out (RAG: the sources, the rewritten question, the sub-questions);
    opening: ClassVar[dict[str, Any]] = {}
    # the field of a record that only says what the service is doing (RAG: ``progress``);
    progress_field: ClassVar[str | None] = None
    # of the kinds (``delta_kinds``), those that are steps towards the answer, not
    # the answer (the agent: thought, action, observation) ...
    step_kinds: ClassVar[frozenset[str]] = frozenset()
    # ... and those that end the answer as an error of this type, even with no ``error``;
    error_kinds: ClassVar[dict[str, str]] = {}
    # the flag a client sees the answer's last record by (the agent: ``end_of_dialog``);
    end_field: ClassVar[str] = "end_of_stream"
    # the final record's fields that are the service's own result, beyond the text
    # (LazyRAG: the subgraph, confidence, what is missing) ...
    result_fields: ClassVar[tuple[str, ...]] = ()
    # ... the one of them that, set, says the text failed while the rest stands ...
    result_error: ClassVar[str | None] = None
    # ... and the short ones an API that shows only text puts beside it (the OpenAI
    # API's last chunk).
    brief_fields: ClassVar[tuple[str, ...]] = ()

    error: Error | None = None
    end_of_stream: bool = False

    # Fields the bus carries but the gateway's wire leaves out.
    wire_hidden: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def wire_edge(cls, record: dict[str, Any]) -> dict[str, Any] | None:
        """The protocol's exact shape of this response's first or final record (the
        two the gateway decodes, when a subclass defines this), or None: unchanged."""
        return None

    @classmethod
    def reshapes_edges(cls) -> bool:
        return any("wire_edge" in vars(model) for model in cls.__mro__
                   if model is not Response)

    def is_final(self) -> bool:
        return self.end_of_stream

    @classmethod
    def failure(cls, error: Error) -> Self:
        return cls(error=error, end_of_stream=True)
