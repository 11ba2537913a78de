"""Claude on Google Vertex AI: the Anthropic Messages API through
``AsyncAnthropicVertex``, read by the same code as the Anthropic provider.

Credentials: ``GOOGLE_OAUTH_ACCESS_TOKEN`` when set (e.g. from
``gcloud auth print-access-token``), else Google's application-default credentials,
which the SDK loads and refreshes in a worker thread. Project and location are the
variables Gemini on Vertex AI uses too.
"""
import anthropic

from ..anthropic.provider import AnthropicProvider, pool
from ..provider import LlmSettings

DEFAULT_MODEL = "claude-sonnet-5-5"


class Settings(LlmSettings):
    google_cloud_project: str = ""  # empty: ANTHROPIC_VERTEX_PROJECT_ID, or the credentials'
    google_cloud_location: str = "global"
    google_oauth_access_token: str = ""
    anthropic_vertex_base_url: str = ""  # empty: derived from the location


def make(settings: Settings) -> AnthropicProvider:
    client = anthropic.AsyncAnthropicVertex(
        region=settings.google_cloud_location,
        project_id=settings.google_cloud_project or anthropic.NOT_GIVEN,
        access_token=settings.google_oauth_access_token or None,
        base_url=settings.anthropic_vertex_base_url or None,
        max_retries=0, http_client=pool(settings))
    return AnthropicProvider(client, settings.tg_llm_model or DEFAULT_MODEL,
                             settings.tg_llm_max_tokens)
