"""Prompt service records (PROTOCOL §2, §4) and the shape of a prompt template.

Templates are config type ``prompt``, laid out as TrustGraph's tools read and write
them (its tg-set-prompt and tg-show-prompts work here as they do there): a template
at key ``template.<id>``, value ``PromptTemplate`` as JSON (``response-type`` and
``response_type`` both accepted), and at key ``system`` the system prompt of every
template that has none of its own (a string). A template at plain ``<id>`` (how
configs made before kept them) is read too; ``template.<id>`` wins when both are
there.
"""
from typing import Literal

from pydantic import AliasChoices, Field, JsonValue

from .record import Record, Response
from .text_completion import Sampling

PROMPT_CONFIG_TYPE = "prompt"
TEMPLATE_KEY_PREFIX = "template."
SYSTEM_PROMPT_KEY = "system"


def template_key(id: str) -> str:
    """The config key of template ``id``."""
    return TEMPLATE_KEY_PREFIX + id


def template_keys(id: str) -> tuple[str, str]:
    """Every key template ``id`` may be kept at, the one that wins first."""
    return template_key(id), id


def prompt_config(values: dict[str, JsonValue]) -> tuple[dict[str, JsonValue], str]:
    """Config type ``prompt`` as (each template's value by id, the shared system
    prompt: "" when there is none, or it is not a string)."""
    templates = {key: value for key, value in values.items()
                 if key != SYSTEM_PROMPT_KEY and not key.startswith(TEMPLATE_KEY_PREFIX)}
    templates |= {key.removeprefix(TEMPLATE_KEY_PREFIX): value
                  for key, value in values.items() if key.startswith(TEMPLATE_KEY_PREFIX)}
    system = values.get(SYSTEM_PROMPT_KEY)
    return templates, system if isinstance(system, str) else ""

ResponseType = Literal["text", "json", "jsonl"]


class PromptTemplate(Record):
    system: str = ""
    prompt: str  # Jinja2 template text
    response_type: ResponseType = "text"
    # Optional JSON schema the parsed answer of a json/jsonl template must match
    # (for jsonl: each line). Called "schema" in config; the attribute name avoids
    # shadowing pydantic's own.
    json_schema: dict[str, JsonValue] | None = Field(
        default=None, validation_alias=AliasChoices("schema", "json_schema", "json-schema"),
        serialization_alias="schema")

    def config_value(self) -> dict:
        """The JSON value to store in config."""
        return self.model_dump(by_alias=True, exclude_none=True)


class PromptRequest(Sampling):  # max_tokens, temperature, stop: passed to text-completion
    id: str  # template id
    variables: dict[str, JsonValue] | None = None
    terms: dict[str, str] | None = None  # legacy: each value JSON-encoded
    streaming: bool = False
    model: str | None = None  # passed on to text-completion (TextCompletionRequest.model)
    # Text templates only: a JSON Schema the answer must match (the agent's steps);
    # the text still streams as written, and is checked at its end. A json/jsonl
    # template's schema is its own. Read as ``schema`` too.
    json_schema: dict[str, JsonValue] | None = Field(
        None, validation_alias=AliasChoices("json_schema", "json-schema", "schema"))


class PromptResponse(Response):
    delta_field = "text"
    result_fields = ("object",)  # a JSON template's answer: no text, one value

    text: str | None = None  # text templates: a delta (streaming) or the full text
    object: str | None = None  # json/jsonl templates: the whole answer as JSON text
    in_token: int | None = None
    out_token: int | None = None
    model: str | None = None
