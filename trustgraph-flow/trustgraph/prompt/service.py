"""The prompt processor: renders a template kept in config (type ``prompt``, laid out
as ``trustgraph.schema.prompt`` says) and asks text-completion.

Text templates relay text-completion's answer (``relay``): its deltas passed on as
they are (those already waiting as one; none is held back to wait for more), then
one final record with the token totals and model; a request may give a text
template a JSON Schema (the agent's steps), which text-completion answers under and
checks. JSON/JSONL templates never stream partial text: their schema goes to
text-completion, which has the model's server constrain the answer to it and checks
it; the whole answer is sent as one record with ``object``, or as a clear error
naming the template.

Templates are read from config at start (the shipped defaults are put there first if
config has no prompts) and re-read on every change notification, so edits apply to
the next request without a restart.
"""
import json
import logging
from typing import Any

from trustgraph import tracing
from trustgraph.base import (
    BadRequest,
    Context,
    Handler,
    ProcessorSettings,
    ProcessorSpec,
    Relay,
    Runtime,
    Service,
    ServiceClient,
    ServiceError,
    relay,
)
from trustgraph.schema import (
    PROMPT_CONFIG_TYPE,
    PromptRequest,
    PromptResponse,
    TextCompletionRequest,
    TextCompletionResponse,
    prompt_config,
)
from trustgraph.schema.text_completion import OFF_SCHEMA, OFF_SCHEMA_SUBJECT

from .defaults import default_config
from .templates import Compiled, PromptError, Templates

log = logging.getLogger(__name__)

NAME = "prompt"


class PromptSettings(ProcessorSettings):
    """The templates are config (``TG_CONFIG_WAIT``: how long start-up waits for it
    before serving the shipped ones)."""


def request_variables(request: PromptRequest) -> dict[str, Any]:
    """``terms`` (JSON-encoded, legacy) overlaid by ``variables``."""
    variables: dict[str, Any] = {}
    for name, encoded in (request.terms or {}).items():
        try:
            variables[name] = json.loads(encoded)
        except json.JSONDecodeError:
            raise BadRequest(f"term '{name}' is not JSON-encoded: "
                                              f"{encoded[:100]!r}") from None
    variables.update(request.variables or {})
    return variables


def prompt_handler(templates: Templates) -> Handler[PromptRequest, PromptResponse]:
    async def handle(request: PromptRequest, ctx: Context
                     ) -> Relay[PromptResponse] | PromptResponse:
        """Text: text-completion's answer relayed. JSON: one record with the parsed
        answer. Text-completion's errors are passed on as it said them."""
        template = templates.get(request.id)
        system, prompt = template.render(request_variables(request))
        tracing.note(tracing.names.PROMPT_TEMPLATE, request.id)
        tracing.note(tracing.names.PROMPT_CHARS, len(system) + len(prompt))
        llm = await ctx.clients.get("text-completion")
        if template.response_type == "text":
            return Relay(relay(llm.frames(TextCompletionRequest(
                system=system, prompt=prompt, streaming=request.streaming,
                model=request.model, json_schema=request.json_schema,
                **request.sampling())), TextCompletionResponse, final_text))
        if request.json_schema is not None:
            raise BadRequest(f"template '{template.id}' is {template.response_type} and "
                             "answers under its own schema: give json_schema only with "
                             "a text template")
        return await _structured(llm, template, TextCompletionRequest(
            system=system, prompt=prompt, model=request.model,
            json_schema=template.asked_schema, **request.sampling()))
    return handle


def final_text(final: TextCompletionResponse) -> PromptResponse:
    """Text-completion's final record as the prompt's: its text (the whole answer
    when not streaming), the token totals and the model."""
    return PromptResponse(text=final.response, end_of_stream=True, in_token=final.in_token,
                          out_token=final.out_token, model=final.model)


async def _structured(llm: ServiceClient, template: Compiled, request: TextCompletionRequest
                      ) -> PromptResponse:
    """The answer of a json/jsonl template, parsed. An answer text-completion found off
    the template's schema is this service's ``prompt-error`` naming the template;
    text-completion's other errors are passed on as it said them."""
    try:
        answer = await llm.call(request, TextCompletionResponse)
    except ServiceError as failure:
        if failure.error.type != OFF_SCHEMA:
            raise
        said = failure.error.message.removeprefix(OFF_SCHEMA_SUBJECT).lstrip()
        raise PromptError(f"{OFF_SCHEMA_SUBJECT} for template '{template.id}' {said}") from None
    value = template.parse(answer.response)
    return PromptResponse(object=json.dumps(value, ensure_ascii=False), end_of_stream=True,
                          in_token=answer.in_token, out_token=answer.out_token,
                          model=answer.model)


async def prompt_services(runtime: Runtime) -> list[Service]:
    defaults = default_config()
    templates = Templates(*prompt_config(defaults))  # until config answers
    client = await runtime.config()
    first_read = True

    async def on_change(config: dict[str, dict[str, Any]], version: int) -> None:
        nonlocal first_read
        values = config[PROMPT_CONFIG_TYPE]
        if first_read and not values:
            log.info("config has no prompts: storing the %d shipped templates",
                     len(defaults) - 1)
            await client.put_many(PROMPT_CONFIG_TYPE, defaults)
            values = defaults
        first_read = False
        templates.replace(*prompt_config(values))
        log.info("prompt templates at config version %d", version)

    if not await runtime.watch_config([PROMPT_CONFIG_TYPE], on_change,
                                      runtime.settings.tg_config_wait):
        log.warning("config service not reached: serving the shipped templates until "
                    "it announces itself")
    return [Service(NAME, PromptRequest, PromptResponse, prompt_handler(templates))]


SPEC = ProcessorSpec(NAME, PromptSettings, prompt_services, uses=("text-completion",))
