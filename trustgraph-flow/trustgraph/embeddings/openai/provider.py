"""Embeddings from any server with the OpenAI ``POST /v1/embeddings`` API: OpenAI
itself, vLLM, LM Studio, llama.cpp's server, Ollama's ``/v1``, LiteLLM, ...

The endpoint is ``TG_EMBEDDINGS_URL``, else ``OPENAI_BASE_URL``, else OpenAI;
the key is ``OPENAI_API_KEY``. Vectors are asked for as JSON floats (not the
SDK's base64 default), which every compatible server understands.
"""
import openai

from ..provider import EmbeddingsError, EmbeddingsSettings

DEFAULT_MODEL = "text-embedding-3-small"


def make(settings: EmbeddingsSettings) -> "OpenAiEmbedder":
    base_url = settings.tg_embeddings_url or settings.openai_base_url or None
    # Local compatible servers need no key, but the SDK insists on one.
    client = openai.AsyncOpenAI(api_key=settings.openai_api_key or "not-needed",
                                base_url=base_url, max_retries=3)
    return OpenAiEmbedder(client, settings.tg_embeddings_model or DEFAULT_MODEL)


class OpenAiEmbedder:
    def __init__(self, client: openai.AsyncOpenAI, model: str) -> None:
        self.client = client
        self.name = model

    async def embed(self, texts: list[str]) -> list[list[float]]:
        try:
            response = await self.client.embeddings.create(
                model=self.name, input=texts, encoding_format="float")
        except openai.APIStatusError as error:
            raise EmbeddingsError(f"{self.client.base_url} answered {error.status_code}: "
                                  f"{error.message}") from None
        except openai.APIConnectionError as error:
            raise EmbeddingsError(
                f"cannot reach the embeddings server at {self.client.base_url}: {error}") from None
        data = sorted(response.data, key=lambda item: item.index)
        if len(data) != len(texts):
            raise EmbeddingsError(f"{self.client.base_url} sent {len(data)} vectors "
                                  f"for {len(texts)} texts")
        return [item.embedding for item in data]
