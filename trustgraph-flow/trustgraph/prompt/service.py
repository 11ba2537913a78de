"""The prompt processor: renders a template kept in config (type ``prompt``) and asks
text-completion.

Text templates stream the model's deltas straight through (deltas that are already
waiting go out as one record; none is held back to wait for more), then one final
record with the token totals and model. JSON/JSONL templates never stream partial
text: the whole answer is collected, parsed and checked against the template's
schema, and sent as one record with ``object``, or as a clear error.

Templates are read from config at start (the shipped defaults are put there first if
config has no prompts) and re-read on every change notification, so edits apply to
the next request without a restart.
"""
import json
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from pydantic import Field

from trustgraph.base import (
    BadRequest,
    Context,
    HandledError,
    ProcessorSettings,
    ProcessorSpec,
    Requester,
    RequestTimeout,
    Runtime,
    Service,
    ServiceError,
)
from trustgraph.schema import (
    PROMPT_CONFIG_TYPE,
    PromptRequest,
    PromptResponse,
    TextCompletionRequest,
    TextCompletionResponse,
    decode,
)

from .defaults import default_values
from .templates import Compiled, PromptError, Templates

log = logging.getLogger(__name__)

NAME = "prompt"


class PromptSettings(ProcessorSettings):
    tg_config_wait: float = Field(10.0, description=(
        "seconds start-up waits for the config service before serving the shipped "
        "templates (config is read as soon as it announces itself)"))


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


def prompt_handler(templates: Templates):
    async def handle(request: PromptRequest, ctx: Context) -> AsyncGenerator[PromptResponse, None]:
        template = templates.get(request.id)
        system, prompt = template.render(request_variables(request))
        llm = await ctx.clients.get("text-completion")
        try:
            if template.response_type == "text":
                # Closed here and now when the request is cancelled, so the
                # text-completion request is cancelled too.
                async with aclosing(_text(llm, TextCompletionRequest(
                        system=system, prompt=prompt, streaming=request.streaming,
                        model=request.model, **request.sampling()))) as text:
                    async for record in text:
                        yield record
            else:
                yield await _structured(llm, template, TextCompletionRequest(
                    system=system, prompt=prompt, model=request.model,
                    **request.sampling()))
        except ServiceError as error:  # text-completion's own error, passed on as it is
            raise HandledError(error.error.type, error.error.message) from None
        except RequestTimeout as error:
            raise PromptError(str(error)) from None
    return handle


async def _text(llm: Requester, request: TextCompletionRequest
                ) -> AsyncGenerator[PromptResponse, None]:
    async with aclosing(llm.frames(request)) as frames:
        async for batch in frames:
            deltas: list[str] = []
            for data, final in batch:  # only the last frame of a batch can be final
                record = decode(TextCompletionResponse, data)
                if record.error is not None or final:
                    if deltas:
                        yield PromptResponse(text="".join(deltas))
                        deltas = []
                    if record.error is not None:
                        raise ServiceError(record.error)
                    yield PromptResponse(
                        text=record.response, end_of_stream=True, in_token=record.in_token,
                        out_token=record.out_token, model=record.model)
                else:
                    deltas.append(record.response)
            if deltas:
                yield PromptResponse(text="".join(deltas))


async def _structured(llm: Requester, template: Compiled, request: TextCompletionRequest
                      ) -> PromptResponse:
    answer = await llm.call(request, TextCompletionResponse)
    value = template.parse(answer.response)
    return PromptResponse(object=json.dumps(value, ensure_ascii=False), end_of_stream=True,
                          in_token=answer.in_token, out_token=answer.out_token,
                          model=answer.model)


async def prompt_services(runtime: Runtime) -> list[Service]:
    defaults = default_values()
    templates = Templates(defaults)  # until config answers
    client = await runtime.config()
    first_read = True

    async def on_change(config: dict[str, dict[str, Any]], version: int) -> None:
        nonlocal first_read
        values = config[PROMPT_CONFIG_TYPE]
        if first_read and not values:
            log.info("config has no prompts: storing the %d shipped templates",
                     len(defaults))
            await client.put_many(PROMPT_CONFIG_TYPE, defaults)
            values = defaults
        first_read = False
        templates.replace(values)
        log.info("prompt templates at config version %d", version)

    if not await runtime.watch_config([PROMPT_CONFIG_TYPE], on_change,
                                      runtime.settings.tg_config_wait):
        log.warning("config service not reached: serving the shipped templates until "
                    "it announces itself")
    return [Service(NAME, PromptRequest, PromptResponse, prompt_handler(templates))]


SPEC = ProcessorSpec(NAME, PromptSettings, prompt_services, uses=("text-completion",))
