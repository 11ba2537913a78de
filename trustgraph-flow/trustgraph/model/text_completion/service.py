"""The text-completion processor: one service, its provider chosen by ``TG_LLM``
(or fixed by ``tg-run text-completion-<provider>``), or by a flow's parameters
(``flow_providers.py``: a provider per distinct choice the running flows make).

A request with a ``json_schema`` is answered under it (``structured.py``): the
provider asks its server to constrain the answer, and the answer is checked before
it leaves. Streaming (the agent's steps) its text goes out as it comes and the check
is at the end; not streaming, an answer that fails the check is asked for once more
with what was wrong, then fails as ``off-schema``.
"""
import asyncio
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing

from trustgraph import tracing
from trustgraph.base import (
    Context,
    Delta,
    Handler,
    ProcessorSpec,
    Relay,
    Runtime,
    Service,
    ServiceError,
)
from trustgraph.schema import TextCompletionRequest, TextCompletionResponse
from trustgraph.schema.config import LLM_CONFIG_KEY, LLM_CONFIG_TYPE

from .choice import chosen_provider, current, provider_module
from .flow_providers import LlmParameters, Providers
from .flow_providers import options_of as flow_options
from .provider import LlmError, LlmSettings, NotConfigured, Options, Overloaded, Usage
from .retry import Retrying
from .structured import OffSchema, Shape, correction, shape_of
from .traced import answered, asked

log = logging.getLogger(__name__)


def options_of(request: TextCompletionRequest) -> Options:
    """What ``request`` asks of the provider besides its text: its ``model`` and its
    sampling options (unset: its flow's, else the provider's settings)."""
    shape = shape_of(request.json_schema) if request.json_schema is not None else None
    return Options(model=request.model or None, max_tokens=request.max_tokens,
                   temperature=request.temperature, stop=request.stop or None,
                   schema=shape.sent if shape is not None else None)


def completion_handler(providers: Providers | Retrying, name: str = "", model: str = ""
                       ) -> Handler[TextCompletionRequest, TextCompletionResponse]:
    """The handler; given one provider (``Retrying``), that one answers every flow.
    ``name`` and ``model``: the processor's own provider and its default model, as a
    request's span names them where its flow chooses none."""
    if isinstance(providers, Retrying):
        providers = Providers("", providers)

    async def complete(request: TextCompletionRequest, ctx: Context
                       ) -> Relay[TextCompletionResponse]:
        """Streaming: each piece of text as a ``Delta`` (a ``TextCompletionResponse``
        once it leaves the process), then the totals; else the whole answer once.
        Under a schema the answer is checked first (``structured``)."""
        flow = ctx.parameters.of(LlmParameters)
        provider = await providers.get(flow)
        options = flow_options(options_of(request), flow)
        asked(tracing.current_span(), flow.llm_provider or name, model, request, options)
        if options.schema is None:
            return Relay(_answer(provider, request, options))
        shape = shape_of(request.json_schema or {})
        if request.streaming and not shape.wrapped:
            return Relay(_answer(provider, request, options, checked=shape))
        return Relay(_checked_whole(provider, request, options, shape))
    return complete


async def _answer(provider: Retrying, request: TextCompletionRequest, options: Options,
                  checked: Shape | None = None
                  ) -> AsyncGenerator[Delta | TextCompletionResponse, None]:
    """The provider's answer: streaming, each piece as a ``Delta``, else collected;
    then a final record with the totals (and, not streaming, the text). Streaming
    under a schema (``checked``), the final record comes only once the whole text is
    checked: it cannot be asked for again, the caller has it already. After the
    first piece, the pieces are read from the provider's own generator
    (``Retrying.start``): nothing stands between it and this loop."""
    parts: list[str] = []  # not streaming, or checked: the answer so far
    keep = not request.streaming or checked is not None
    usage = Usage(None, None, "")
    piece, rest = await provider.start(request.system, request.prompt, options)
    try:
        async with aclosing(rest):
            while piece is not None:
                if isinstance(piece, Usage):
                    usage = piece
                else:
                    if keep:
                        parts.append(piece)
                    if request.streaming:
                        yield Delta(piece)
                piece = await anext(rest, None)
    except Overloaded as error:  # before the first piece, start() retried it
        raise LlmError(f"provider overloaded mid-answer: {error.message}") from None
    if checked is not None:
        checked.answer("".join(parts))
    answered(tracing.current_span(), usage, None if request.streaming else "".join(parts))
    yield TextCompletionResponse(
        response="" if request.streaming else "".join(parts), end_of_stream=True,
        in_token=usage.in_token, out_token=usage.out_token, model=usage.model)


async def _checked_whole(provider: Retrying, request: TextCompletionRequest,
                         options: Options, shape: Shape
                         ) -> AsyncGenerator[Delta | TextCompletionResponse, None]:
    """The whole answer, checked; asked once more, told what was wrong, when it
    fails. Streaming (a schema without an object root: its answer is unwrapped
    here), it is one delta, then the final record."""
    usage = Usage()
    asked = request.model_copy(update={"streaming": False})
    try:
        text = shape.answer(await _collected(provider, asked, options, usage))
    except OffSchema as failure:
        log.info("off-schema answer, asked again: %s", failure.message)
        again = asked.model_copy(update={"prompt": correction(request.prompt,
                                                                failure.message)})
        try:
            text = shape.answer(await _collected(provider, again, options, usage))
        except OffSchema as second:
            raise OffSchema(f"{second.message} (asked twice)") from None
    if request.streaming:
        yield Delta(text)
    yield TextCompletionResponse(response="" if request.streaming else text,
                                 end_of_stream=True, in_token=usage.in_token,
                                 out_token=usage.out_token, model=usage.model)


async def _collected(provider: Retrying, request: TextCompletionRequest, options: Options,
                     usage: Usage) -> str:
    """The text of a non-streaming answer; its tokens added to ``usage``."""
    async with aclosing(_answer(provider, request, options)) as pieces:
        async for final in pieces:
            assert isinstance(final, TextCompletionResponse)  # not streaming: one record
            usage.add(Usage.of(final))
            return final.response
    raise LlmError("the provider ended without an answer")


def spec_for(provider_name: str) -> ProcessorSpec:
    module = provider_module(provider_name) if provider_name else None
    settings_model = module.Settings if module else LlmSettings

    def services(runtime: Runtime) -> list[Service]:
        settings: LlmSettings = runtime.settings
        own = Retrying(module.make(settings) if module else NotConfigured(),
                       settings.tg_llm_retries)
        providers = Providers(provider_name, own, settings)
        runtime.on_flows(providers.keep)
        recording = asyncio.ensure_future(record_choice(runtime, provider_name))

        async def close() -> None:
            recording.cancel()
            await providers.aclose()

        choice = current(provider_name, settings if provider_name else None)
        handler = completion_handler(providers, choice.provider, choice.model)
        return [Service("text-completion", TextCompletionRequest, TextCompletionResponse,
                        handler, error_type="llm-error", close=close)]

    name = f"text-completion-{provider_name}" if provider_name else "text-completion"
    return ProcessorSpec(name, settings_model, services)


async def record_choice(runtime: Runtime, provider_name: str) -> None:
    """Which LLM answers, recorded in config for the gateway's ``GET /api/v1/llm`` (the
    workbench's demo-model notice). Best effort: text-completion serves either way."""
    try:
        config = await runtime.config()
        choice = current(provider_name, runtime.settings if provider_name else None)
        await config.put(LLM_CONFIG_TYPE, LLM_CONFIG_KEY, choice.as_json())
    except ServiceError as error:
        log.info("which LLM answers is not recorded in config: %s", error.error.message)


def chosen_spec(argv: list[str]) -> ProcessorSpec:
    """``tg-run text-completion``: the provider that ``argv`` or the environment names."""
    return spec_for(chosen_provider(argv))
