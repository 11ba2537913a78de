"""LM Studio's local server (Developer tab, or ``lms server start``): the OpenAI
adapter at LM Studio's default address. LM Studio loads the model a request names,
so name one it has (``lms ls``)."""
from ..openai.formats import json_schema
from ..openai.provider import OpenAiProvider, compatible
from ..provider import LlmSettings


class Settings(LlmSettings):
    lmstudio_base_url: str = "http://localhost:1234/v1"
    lmstudio_api_key: str = ""  # only when the server requires authentication


def make(settings: Settings) -> OpenAiProvider:
    if not settings.tg_llm_model:
        raise SystemExit("TG_LLM=lmstudio needs TG_LLM_MODEL: a model key from `lms ls`")
    return compatible(settings, settings.lmstudio_base_url, settings.lmstudio_api_key,
                      schema_format=json_schema)
