"""Which LLM text-completion answers with: the provider ``TG_LLM`` (or the
environment) chooses, and what a user should be told about it, as ``tg-start``
prints it and text-completion records it in config for the gateway's
``GET /api/v1/llm`` (the workbench's notice). Above all it says plainly when the
answers come from the bundled demo model.
"""
import importlib
import os
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

from .demo import available, is_demo, model_name
from .provider import NOT_CONFIGURED

HOW_TO_CONFIGURE = (
    "For real answers point the platform at an LLM: TG_LLM=openai with OPENAI_API_KEY "
    "(or OPENAI_BASE_URL for vLLM, Ollama, LM Studio, ...), another TG_LLM provider, "
    "or a bigger GGUF with TG_LOCAL_MODEL=/path/to/model.gguf (README, \"LLM\").")
DEMO = "a tiny offline demo model: answers stream for real but are often wrong"


def provider_module(name: str) -> ModuleType:
    try:
        return importlib.import_module(f"{__package__}.{name.replace('-', '_')}.provider")
    except ModuleNotFoundError as error:
        if error.name and error.name.startswith(__package__):
            raise SystemExit(f"TG_LLM={name!r} is not a known provider") from None
        raise


def chosen_provider(argv: list[str]) -> str:
    """The provider named by ``--tg-llm`` or ``TG_LLM``; else openai when its
    variables are set; else the local demo model when installed; else none."""
    for i, arg in enumerate(argv):
        if arg.startswith("--tg-llm="):
            return arg.split("=", 1)[1]
        if arg == "--tg-llm" and i + 1 < len(argv):
            return argv[i + 1]
    if os.environ.get("TG_LLM"):
        return os.environ["TG_LLM"]
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        return "openai"
    return "local" if available() else ""


@dataclass(frozen=True)
class LlmChoice:
    provider: str  # "" when none is configured
    model: str  # "" when the provider's own default applies
    demo: bool  # the bundled SmolLM2-135M
    notice: str  # what a user should be told, or ""

    def as_json(self) -> dict:
        return asdict(self)

    def lines(self) -> list[str]:
        """What ``tg-start`` prints after ``llm``."""
        if not self.provider:
            return ["NONE configured: every answer will be an error saying how to "
                    "configure one", HOW_TO_CONFIGURE]
        named = f"{self.provider}: {self.model}" if self.model else self.provider
        if self.demo:
            return [f"{named}, {DEMO}", HOW_TO_CONFIGURE]
        return [named]


def current(provider: str | None = None, settings: Any = None) -> LlmChoice:
    """The LLM text-completion runs with ``provider`` (default: the one it would
    choose from this process's environment), configured by ``settings`` (default:
    that provider's settings read from the environment)."""
    provider = chosen_provider([]) if provider is None else provider
    if not provider:
        return LlmChoice("", "", False, NOT_CONFIGURED)
    try:
        settings = settings or provider_module(provider).Settings()
    except (SystemExit, ImportError, ValueError):  # text-completion will say why
        return LlmChoice(provider, "", False, "")
    if provider != "local":
        return LlmChoice(provider, settings.tg_llm_model, False, "")
    name, demo = model_name(settings.tg_local_model), is_demo(settings.tg_local_model)
    return LlmChoice(provider, name, demo,
                     f"{name} is {DEMO}. {HOW_TO_CONFIGURE}" if demo else "")
