from typing import Any

from pydantic import AliasChoices, Field, JsonValue

from .record import Record, Response

MAX_STOP_SEQUENCES = 4  # as OpenAI's chat API allows
# The error type of an answer that is not JSON matching the schema it was asked for,
# whose message begins with OFF_SCHEMA_SUBJECT (the prompt service puts the template's
# name after it).
OFF_SCHEMA = "off-schema"
OFF_SCHEMA_SUBJECT = "the model's answer"


class Sampling(Record):
    """How the LLM writes an answer, where a caller wants other than the provider's
    settings (``TG_LLM_MAX_TOKENS``, ``TG_LLM_TEMPERATURE``, no stop sequence): the
    OpenAI-compatible API's ``max_tokens``, ``temperature`` and ``stop``. Requests of
    the services that end in one LLM answer carry them (text-completion, prompt, the
    RAG services) and pass them on; unset, the provider's settings apply. A provider
    that cannot honour one ignores it (docs/providers)."""

    max_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    stop: list[str] | None = Field(None, max_length=MAX_STOP_SEQUENCES)

    def sampling(self) -> dict[str, Any]:
        """The options set, by name: what to pass on to the next hop."""
        return {name: value for name in Sampling.model_fields
                if (value := getattr(self, name)) not in (None, [])}


class TextCompletionRequest(Sampling):
    system: str = ""
    prompt: str
    streaming: bool = False
    # A model of the configured provider to answer with instead of its own (LazyRAG's
    # LAZY_RAG_SUMMARY_MODEL); unset: the provider's configured model.
    model: str | None = None
    # A JSON Schema the answer must match: the provider asks its server to constrain
    # the answer to it, and text-completion checks the answer before it leaves
    # (docs/providers). Unset: free text. Read as ``schema`` too.
    json_schema: dict[str, JsonValue] | None = Field(
        None, validation_alias=AliasChoices("json_schema", "json-schema", "schema"))


class TextCompletionResponse(Response):
    delta_field = "response"

    response: str = ""
    in_token: int | None = None
    out_token: int | None = None
    model: str | None = None
