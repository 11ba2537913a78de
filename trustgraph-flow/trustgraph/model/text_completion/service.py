"""The text-completion processor: one service, the provider chosen by ``TG_LLM``."""
from collections.abc import AsyncIterator

from trustgraph.base import Context, ProcessorSettings, ProcessorSpec, Service, processor_main
from trustgraph.schema import TextCompletionRequest, TextCompletionResponse

from .provider import NotConfigured, Provider, Usage


class TextCompletionSettings(ProcessorSettings):
    tg_llm: str = ""  # provider; empty picks openai when its variables are set
    tg_llm_model: str = ""
    tg_llm_temperature: float = 0.0
    tg_llm_max_tokens: int = 4096
    openai_api_key: str = ""
    openai_base_url: str = ""


def make_provider(settings: TextCompletionSettings) -> Provider:
    llm = settings.tg_llm or ("openai" if settings.openai_api_key or settings.openai_base_url
                              else "")
    if llm == "openai":
        from .openai.provider import OpenAiProvider
        return OpenAiProvider(settings.openai_api_key, settings.openai_base_url or None,
                              settings.tg_llm_model, settings.tg_llm_temperature,
                              settings.tg_llm_max_tokens)
    if llm:
        raise SystemExit(f"TG_LLM={llm!r} is not a known provider (known: openai)")
    return NotConfigured()


def completion_handler(provider: Provider):
    async def complete(request: TextCompletionRequest, ctx: Context
                       ) -> AsyncIterator[TextCompletionResponse]:
        parts: list[str] = []
        usage = Usage(None, None, "")
        async for piece in provider.stream(request.system, request.prompt):
            if isinstance(piece, Usage):
                usage = piece
            elif request.streaming:
                yield TextCompletionResponse(response=piece)
            else:
                parts.append(piece)
        yield TextCompletionResponse(
            response="".join(parts), end_of_stream=True, in_token=usage.in_token,
            out_token=usage.out_token, model=usage.model)
    return complete


def services(settings: TextCompletionSettings) -> list[Service]:
    return [Service("text-completion", TextCompletionRequest, TextCompletionResponse,
                    completion_handler(make_provider(settings)), error_type="llm-error")]


PROCESSOR = ProcessorSpec("text-completion", TextCompletionSettings, services)
main = processor_main(PROCESSOR)
