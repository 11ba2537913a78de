"""Embeddings from Ollama's native API: ``POST /api/embed`` with
``{"model", "input": [texts]}`` answers ``{"embeddings": [[float]]}``.

The host is ``TG_EMBEDDINGS_URL``, else ``OLLAMA_HOST``. The default model,
``all-minilm``, is all-MiniLM-L6-v2: the same vectors as the local default.
Ollama ships no async SDK that the platform installs, and this is one POST.
A session per request: requests carry whole batches, so a connection set-up is
small beside the work, and nothing is left open for the process to clean up.
"""
import aiohttp

from ..provider import EmbeddingsError, EmbeddingsSettings

DEFAULT_MODEL = "all-minilm"
TIMEOUT = aiohttp.ClientTimeout(total=300, sock_connect=10)


def make(settings: EmbeddingsSettings) -> "OllamaEmbedder":
    host = (settings.tg_embeddings_url or settings.ollama_host).rstrip("/")
    if "://" not in host:  # OLLAMA_HOST is often written as host:port
        host = f"http://{host}"
    return OllamaEmbedder(host, settings.tg_embeddings_model or DEFAULT_MODEL)


class OllamaEmbedder:
    def __init__(self, host: str, model: str) -> None:
        self.url = f"{host}/api/embed"
        self.name = model

    async def embed(self, texts: list[str]) -> list[list[float]]:
        request = {"model": self.name, "input": texts, "truncate": True}
        try:
            async with aiohttp.ClientSession(timeout=TIMEOUT) as session, \
                    session.post(self.url, json=request) as response:
                body = await response.json(content_type=None)
        except aiohttp.ClientConnectorError as error:
            raise EmbeddingsError(f"cannot reach Ollama at {self.url}: {error}") from None
        except (aiohttp.ClientError, ValueError) as error:
            raise EmbeddingsError(f"Ollama at {self.url} failed: "
                                  f"{type(error).__name__}: {error}") from None
        if not isinstance(body, dict):
            body = {"error": f"unexpected answer {str(body)[:200]}"}
        if response.status != 200 or "error" in body:
            raise EmbeddingsError(f"Ollama at {self.url} answered {response.status}: "
                                  f"{body.get('error', '')}")
        vectors = body.get("embeddings")
        if not isinstance(vectors, list) or len(vectors) != len(texts):
            raise EmbeddingsError(f"Ollama at {self.url} sent {len(vectors or [])} vectors "
                                  f"for {len(texts)} texts")
        return vectors

