"""What an embeddings provider is, the settings that choose one, and ``make``.

A provider is an object with ``async def embed(texts) -> list[list[float]]``
returning one vector per text, in order; failures raise ``EmbeddingsError``.
``TG_EMBEDDINGS`` picks it: ``minilm`` (default: all-MiniLM-L6-v2 on this
machine), ``openai`` (any server with the OpenAI ``/v1/embeddings`` API) or
``ollama`` (Ollama's ``/api/embed``).
"""
import importlib
from typing import Literal, Protocol

from trustgraph.base import HandledError, ProcessorSettings


class EmbeddingsError(HandledError):
    def __init__(self, message: str) -> None:
        super().__init__("embeddings-error", message)


class Embedder(Protocol):
    name: str  # the model, for logs

    async def embed(self, texts: list[str]) -> list[list[float]]: ...


class EmbeddingsSettings(ProcessorSettings):
    tg_embeddings: Literal["minilm", "openai", "ollama"] = "minilm"
    tg_embeddings_model: str = ""  # remote providers' model name; empty: their default
    tg_embeddings_url: str = ""  # remote providers' base URL; empty: OPENAI_BASE_URL / OLLAMA_HOST
    tg_embeddings_max_texts: int = 256  # per request: bounds work and the reply's size
    # minilm only: tokens per model run once padded (256: one full chunk, or a few
    # dozen entity labels or queries), runs side by side (0: one per core), each on
    # this many onnxruntime threads (0: one per core), and other files of the same
    # model (an ONNX export and its tokenizer.json). Why: docs/embeddings.md.
    tg_embeddings_run_tokens: int = 256
    tg_embeddings_runs: int = 0
    tg_embeddings_threads: int = 1
    tg_embeddings_onnx: str = ""
    tg_embeddings_tokenizer: str = ""
    openai_api_key: str = ""
    openai_base_url: str = ""
    ollama_host: str = "http://localhost:11434"


def make(settings: EmbeddingsSettings) -> Embedder:
    """The provider ``settings`` name, ready to use (the local model is loaded).

    Each provider is ``embeddings/<name>/provider.py`` with a ``make(settings)``, the
    skeleton text-completion's providers have."""
    module = importlib.import_module(f"{__package__}.{settings.tg_embeddings}.provider")
    return module.make(settings)
