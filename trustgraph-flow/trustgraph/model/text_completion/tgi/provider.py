"""Hugging Face Text Generation Inference through its Messages API (TGI 1.4+): the
OpenAI adapter at the address of TGI's Docker quick start (``-p 8080:80``). TGI serves
the one model it was started with; "tgi" is the name its documentation sends."""
from ..openai.formats import tgi_grammar
from ..openai.provider import OpenAiProvider, compatible
from ..provider import LlmSettings


class Settings(LlmSettings):
    tgi_base_url: str = "http://localhost:8080/v1"
    tgi_api_key: str = ""  # e.g. a Hugging Face token for an Inference Endpoint


def make(settings: Settings) -> OpenAiProvider:
    return compatible(settings, settings.tgi_base_url, settings.tgi_api_key,
                      default_model="tgi",
                      schema_format=tgi_grammar)
