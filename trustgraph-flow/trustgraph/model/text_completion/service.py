"""The text-completion processor: one service, its provider chosen by ``TG_LLM``
(or fixed by ``tg-run text-completion-<provider>``), or by a flow's parameters
(``flow_providers.py``: a provider per distinct choice the running flows make)."""
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
from .traced import answered, asked

log = logging.getLogger(__name__)


def options_of(request: TextCompletionRequest) -> Options:
    """What ``request`` asks of the provider besides its text: its ``model`` and its
    sampling options (unset: its flow's, else the provider's settings)."""
    return Options(model=request.model or None, max_tokens=request.max_tokens,
                   temperature=request.temperature, stop=request.stop or None)


def completion_handler(providers: Providers | Retrying, name: str = "", model: str = ""
                       ) -> Handler[TextCompletionRequest, TextCompletionResponse]:
    """The handler; given one provider (``Retrying``), that one answers every flow.
    ``name`` and ``model``: the processor's own provider and its default model, as a
    request's span names them where its flow chooses none."""
    if isinstance(providers, Retrying):
        providers = Providers("", providers)

    async def complete(request: TextCompletionRequest, ctx: Context
                       ) -> AsyncGenerator[Delta | TextCompletionResponse, None]:
        """Streaming: each piece of text as a ``Delta`` (a ``TextCompletionResponse``
        once it leaves the process), then the totals; else the whole answer once.
        After the first piece, the pieces are read from the provider's own generator
        (``Retrying.start``): nothing stands between it and this loop."""
        parts: list[str] = []
        usage = Usage(None, None, "")
        flow = ctx.parameters.of(LlmParameters)
        provider = await providers.get(flow)
        options = flow_options(options_of(request), flow)
        span = tracing.current_span()
        asked(span, flow.llm_provider or name, model, request, options)
        piece, rest = await provider.start(request.system, request.prompt, options)
        try:
            async with aclosing(rest):
                while piece is not None:
                    if isinstance(piece, Usage):
                        usage = piece
                    elif request.streaming:
                        yield Delta(piece)
                    else:
                        parts.append(piece)
                    piece = await anext(rest, None)
        except Overloaded as error:  # before the first piece, start() retried it
            raise LlmError(f"provider overloaded mid-answer: {error.message}") from None
        text = "".join(parts)
        answered(span, usage, None if request.streaming else text)
        yield TextCompletionResponse(
            response=text, end_of_stream=True, in_token=usage.in_token,
            out_token=usage.out_token, model=usage.model)
    return complete


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
