"""Mistral through the OpenAI adapter: its chat stream is OpenAI's SSE shape, except
that it rejects ``stream_options`` (it reports usage on the last chunk unasked) and
sends in-stream failures as ``{"object": "error"}`` chunks, which the adapter reads.
A schema goes as OpenAI's ``response_format`` ``json_schema`` (strict where it fits),
which Mistral's API takes as it is.
The ``mistralai`` SDK would cost ~8 ms more CPU per request for the same stream.
"""
import openai

from ..openai.formats import openai_strict
from ..openai.provider import Endpoint, OpenAiProvider
from ..provider import LlmSettings

DEFAULT_MODEL = "mistral-large-latest"
DEFAULT_BASE_URL = "https://api.mistral.ai"


class Settings(LlmSettings):
    mistral_api_key: str = ""
    mistral_base_url: str = ""  # empty: https://api.mistral.ai


def make(settings: Settings) -> OpenAiProvider:
    if not settings.mistral_api_key and not settings.mistral_base_url:
        raise SystemExit("TG_LLM=mistral needs MISTRAL_API_KEY")
    base_url = (settings.mistral_base_url or DEFAULT_BASE_URL).rstrip("/") + "/v1"
    client = openai.AsyncOpenAI(api_key=settings.mistral_api_key or "not-needed",
                                base_url=base_url, max_retries=0)
    return OpenAiProvider(Endpoint.of(client, label="Mistral"),
                          settings.tg_llm_model or DEFAULT_MODEL,
                          settings.tg_llm_temperature, settings.tg_llm_max_tokens,
                          include_usage=False, connections=settings.tg_llm_connections,
                          schema_format=openai_strict)
