"""The text-completion processor: one service, its provider chosen by ``TG_LLM``
(or fixed by ``tg-run text-completion-<provider>``)."""
import copy
import importlib
import os
from collections.abc import AsyncIterator
from types import ModuleType

from trustgraph.base import Context, Delta, ProcessorSpec, Runtime, Service
from trustgraph.schema import TextCompletionRequest, TextCompletionResponse

from .provider import LlmSettings, NotConfigured, Provider, Usage
from .retry import Retrying


def provider_module(name: str) -> ModuleType:
    try:
        return importlib.import_module(f"{__package__}.{name.replace('-', '_')}.provider")
    except ModuleNotFoundError as error:
        if error.name and error.name.startswith(__package__):
            raise SystemExit(f"TG_LLM={name!r} is not a known provider") from None
        raise


def chosen_provider(argv: list[str]) -> str:
    """The provider named by ``--tg-llm`` or ``TG_LLM``; else openai when its
    variables are set; else none."""
    for i, arg in enumerate(argv):
        if arg.startswith("--tg-llm="):
            return arg.split("=", 1)[1]
        if arg == "--tg-llm" and i + 1 < len(argv):
            return argv[i + 1]
    if os.environ.get("TG_LLM"):
        return os.environ["TG_LLM"]
    return "openai" if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL") else ""


def with_model(provider: Provider, model: str | None) -> Provider:
    """``provider`` answering with ``model`` instead of its configured one. Providers
    keep their model in ``model`` and read it per request, so a shallow copy (sharing
    the HTTP client, settings and retry wrapper's policy) is the same provider with
    another model; one with no model (not configured) is used as it is."""
    inner = getattr(provider, "provider", provider)  # under Retrying
    if not model or not hasattr(inner, "model"):
        return provider
    changed = copy.copy(inner)
    changed.model = model
    if inner is provider:
        return changed
    wrapped = copy.copy(provider)
    wrapped.provider = changed
    return wrapped


def completion_handler(provider: Provider):
    async def complete(request: TextCompletionRequest, ctx: Context
                       ) -> AsyncIterator[Delta | TextCompletionResponse]:
        """Streaming: each piece of text as a ``Delta`` (a ``TextCompletionResponse``
        once it leaves the process), then the totals; else the whole answer once."""
        parts: list[str] = []
        usage = Usage(None, None, "")
        chosen = with_model(provider, request.model)
        async for piece in chosen.stream(request.system, request.prompt):
            if isinstance(piece, Usage):
                usage = piece
            elif request.streaming:
                yield Delta(piece)
            else:
                parts.append(piece)
        yield TextCompletionResponse(
            response="".join(parts), end_of_stream=True, in_token=usage.in_token,
            out_token=usage.out_token, model=usage.model)
    return complete


def spec_for(provider_name: str) -> ProcessorSpec:
    module = provider_module(provider_name) if provider_name else None
    settings_model = module.Settings if module else LlmSettings

    def services(runtime: Runtime) -> list[Service]:
        settings: LlmSettings = runtime.settings
        provider = Retrying(module.make(settings), settings.tg_llm_retries) if module \
            else NotConfigured()
        return [Service("text-completion", TextCompletionRequest, TextCompletionResponse,
                        completion_handler(provider), error_type="llm-error",
                        close=getattr(provider, "aclose", None))]

    name = f"text-completion-{provider_name}" if provider_name else "text-completion"
    return ProcessorSpec(name, settings_model, services)


def chosen_spec(argv: list[str]) -> ProcessorSpec:
    """``tg-run text-completion``: the provider that ``argv`` or the environment names."""
    return spec_for(chosen_provider(argv))
