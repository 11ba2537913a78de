"""A llamafile (or llama.cpp's llama-server): the OpenAI adapter at its default
address. It serves the one model it was started with, whatever a request names."""
from ..openai.formats import llamafile
from ..openai.provider import OpenAiProvider, compatible
from ..provider import LlmSettings


class Settings(LlmSettings):
    llamafile_base_url: str = "http://localhost:8080/v1"
    llamafile_api_key: str = ""  # the --api-key the server was started with, if any


def make(settings: Settings) -> OpenAiProvider:
    return compatible(settings, settings.llamafile_base_url, settings.llamafile_api_key,
                      default_model="LLaMA_CPP",
                      schema_format=llamafile)
