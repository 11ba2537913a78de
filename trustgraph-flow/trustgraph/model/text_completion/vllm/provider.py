"""vLLM's OpenAI-compatible server (``vllm serve <model>``): the OpenAI adapter at
vLLM's default address. vLLM answers only to the model it serves, so name it."""
from ..openai.formats import json_schema
from ..openai.provider import OpenAiProvider, compatible
from ..provider import LlmSettings


class Settings(LlmSettings):
    vllm_base_url: str = "http://localhost:8000/v1"
    vllm_api_key: str = ""  # the --api-key the server was started with, if any


def make(settings: Settings) -> OpenAiProvider:
    if not settings.tg_llm_model:
        raise SystemExit("TG_LLM=vllm needs TG_LLM_MODEL: the model vLLM serves "
                         "(the name given to `vllm serve`, or its --served-model-name)")
    return compatible(settings, settings.vllm_base_url, settings.vllm_api_key,
                      schema_format=json_schema)
