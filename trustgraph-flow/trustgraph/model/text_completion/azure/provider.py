"""Azure OpenAI: the OpenAI adapter with the SDK's ``AsyncAzureOpenAI`` client, which
routes requests to ``{endpoint}/openai/deployments/{deployment}/...?api-version=``
and sends the ``api-key`` header. Only the client differs from the openai provider.
"""
import openai

from ..openai.provider import Endpoint, OpenAiProvider
from ..provider import LlmSettings

# The newest dated GA inference API version; it is also the first GA version that
# reports usage in a stream (stream_options.include_usage).
DEFAULT_API_VERSION = "2024-10-21"


class Settings(LlmSettings):
    azure_openai_endpoint: str = ""  # https://<resource>.openai.azure.com
    azure_openai_api_key: str = ""  # else AZURE_OPENAI_AD_TOKEN (Entra ID), read by the SDK
    azure_openai_deployment: str = ""  # used when TG_LLM_MODEL is not set
    openai_api_version: str = DEFAULT_API_VERSION


def make(settings: Settings) -> OpenAiProvider:
    deployment = settings.tg_llm_model or settings.azure_openai_deployment
    if not settings.azure_openai_endpoint or not deployment:
        raise SystemExit("TG_LLM=azure needs AZURE_OPENAI_ENDPOINT and the deployment "
                         "name in TG_LLM_MODEL or AZURE_OPENAI_DEPLOYMENT")
    try:
        client = openai.AsyncAzureOpenAI(
            azure_endpoint=settings.azure_openai_endpoint, azure_deployment=deployment,
            api_key=settings.azure_openai_api_key or None,
            api_version=settings.openai_api_version, max_retries=0)
    except openai.OpenAIError as error:  # no credentials
        raise SystemExit(f"TG_LLM=azure: {error}") from None
    return OpenAiProvider(Endpoint.of(client), deployment, settings.tg_llm_temperature,
                          settings.tg_llm_max_tokens, connections=settings.tg_llm_connections)
