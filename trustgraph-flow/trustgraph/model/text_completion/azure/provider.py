"""Azure OpenAI: the OpenAI adapter with the SDK's ``AsyncAzureOpenAI`` client, which
holds the credentials (the ``api-key`` header) and the ``api-version`` query. Azure
routes by deployment, named in the URL (``{endpoint}/openai/deployments/{deployment}/
chat/completions``), so a request's model, a deployment, chooses the URL.
"""
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import replace
from urllib.parse import quote

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


def make(settings: Settings) -> "AzureProvider":
    deployment = settings.tg_llm_model or settings.azure_openai_deployment
    if not settings.azure_openai_endpoint or not deployment:
        raise SystemExit("TG_LLM=azure needs AZURE_OPENAI_ENDPOINT and the deployment "
                         "name in TG_LLM_MODEL or AZURE_OPENAI_DEPLOYMENT")
    try:
        client = openai.AsyncAzureOpenAI(
            azure_endpoint=settings.azure_openai_endpoint,
            api_key=settings.azure_openai_api_key or None,
            api_version=settings.openai_api_version, max_retries=0)
    except openai.OpenAIError as error:  # no credentials
        raise SystemExit(f"TG_LLM=azure: {error}") from None
    # The client's base URL is {endpoint}/openai/: a request's deployment goes after it.
    return AzureProvider(Endpoint.of(client), deployment, settings.tg_llm_temperature,
                         settings.tg_llm_max_tokens, connections=settings.tg_llm_connections)


class AzureProvider(OpenAiProvider):
    """The OpenAI adapter, its URL naming the deployment a request is for."""

    def _turn(self, model: str) -> AbstractAsyncContextManager[Endpoint]:
        deployment = f"{self.endpoint.label}deployments/{quote(model, safe='')}/"
        return nullcontext(replace(self.endpoint, url=f"{deployment}chat/completions",
                                   label=deployment))
