"""Gemini on Google Vertex AI: the ``google-genai`` client with ``vertexai=True``,
read by the same code as the Google AI Studio provider.

Credentials: ``GOOGLE_OAUTH_ACCESS_TOKEN`` when set (e.g. from
``gcloud auth print-access-token``; it is not refreshed), else Google's
application-default credentials (``GOOGLE_APPLICATION_CREDENTIALS`` or the
environment's), which the SDK loads on first use and refreshes in a worker thread
(or at start, to find the project, when ``GOOGLE_CLOUD_PROJECT`` is empty). Project
and location are the variables Claude on Vertex AI (``vertexai_claude``) uses too.
"""
import google.auth.exceptions
import google.oauth2.credentials
from google import genai

from ..googleaistudio.provider import GeminiProvider, http_options
from ..provider import LlmSettings

DEFAULT_MODEL = "gemini-2.5-flash"


class Settings(LlmSettings):
    google_cloud_project: str = ""  # empty: the application-default credentials' project
    google_cloud_location: str = "global"
    google_oauth_access_token: str = ""
    vertexai_base_url: str = ""  # empty: derived from the location


def make(settings: Settings) -> GeminiProvider:
    token = settings.google_oauth_access_token
    options = http_options(settings.vertexai_base_url, settings.tg_llm_connections)
    try:  # without a project, this loads the default credentials now, to find one
        client = genai.Client(
            vertexai=True, project=settings.google_cloud_project or None,
            location=settings.google_cloud_location or None,
            credentials=google.oauth2.credentials.Credentials(token) if token else None,
            http_options=options)
    except (ValueError, google.auth.exceptions.GoogleAuthError) as error:
        raise SystemExit(f"TG_LLM=vertexai needs GOOGLE_CLOUD_PROJECT and Google "
                         f"credentials: {error}") from None
    return GeminiProvider(client, options, settings.tg_llm_model or DEFAULT_MODEL,
                          settings.tg_llm_temperature, settings.tg_llm_max_tokens,
                          "Gemini on Vertex AI")
