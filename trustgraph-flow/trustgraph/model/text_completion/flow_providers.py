"""Which provider answers a request: its flow's LLM choice (parameters
``llm-provider``, ``llm-base-url``, ``llm-model``), or the processor's own (``TG_LLM``
and its variables) where the flow makes none.

``Providers`` holds one provider per distinct choice the running flows make, made on
the first request that needs it and closed once no flow makes it (the processor's
own is kept). A chosen provider reads what the choice does not say, above all its
key, from the processor's environment, as its own provider does (``OPENAI_API_KEY``,
``ANTHROPIC_API_KEY``, ...): a flow names where an LLM is, never a secret.
"""
import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace

from pydantic import ValidationError

from trustgraph.base import Flow, FlowParameters

from .choice import provider_module
from .provider import LlmError, LlmSettings, Options
from .retry import Retrying

log = logging.getLogger(__name__)

# A provider's setting for where its server is, by how its name ends (e.g.
# ``openai_base_url``, ``ollama_host``, ``azure_openai_endpoint``).
ENDPOINT_SUFFIXES = ("_base_url", "_host", "_endpoint", "_endpoint_url")


class LlmParameters(FlowParameters):
    """A flow's LLM: every field unset leaves the processor's choice."""

    llm_provider: str | None = None
    llm_model: str | None = None
    llm_base_url: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class Choice:
    provider: str
    base_url: str  # "": the provider's own setting
    model: str  # "": the provider's own (some providers need one to start)


def options_of(asked: Options, flow: LlmParameters) -> Options:
    """What a request asks, its unset options the flow's."""
    return replace(asked, model=asked.model or flow.llm_model,
                   max_tokens=flow.max_tokens if asked.max_tokens is None
                   else asked.max_tokens,
                   temperature=flow.temperature if asked.temperature is None
                   else asked.temperature)


class Providers:
    def __init__(self, name: str, own: Retrying, settings: LlmSettings | None = None
                 ) -> None:
        self._name = name  # the processor's provider ("" when none is configured)
        self._own = own
        self._settings = settings  # None: only its own provider answers
        self._made: dict[Choice, asyncio.Future[Retrying]] = {}

    def choice(self, flow: LlmParameters) -> Choice | None:
        """The flow's choice; None: the processor's own provider answers."""
        name = flow.llm_provider or self._name
        if self._settings is None or (name == self._name and not flow.llm_base_url):
            return None
        return Choice(name, flow.llm_base_url or "", flow.llm_model or "")

    async def get(self, flow: LlmParameters) -> Retrying:
        """The provider of the flow's choice, made on first use (a failure to make
        it is this request's ``LlmError``, and the next request tries again)."""
        choice = self.choice(flow)
        if choice is None:
            return self._own
        made = self._made.get(choice)
        if made is None or (made.done() and made.exception() is not None):
            made = self._made[choice] = asyncio.ensure_future(self._make(choice))
        return await asyncio.shield(made)

    async def _make(self, choice: Choice) -> Retrying:
        assert self._settings is not None  # else every flow has the processor's own
        provider = made(choice, self._settings, same=choice.provider == self._name)
        log.info("a flow's LLM: %s%s%s", choice.provider,
                 f" at {choice.base_url}" if choice.base_url else "",
                 f", model {choice.model}" if choice.model else "")
        return provider

    async def keep(self, flows: Mapping[str, Flow]) -> None:
        """Close the providers no running flow chooses any more."""
        used = {self.choice(flow.parameters.of(LlmParameters)) for flow in flows.values()}
        for choice in [choice for choice in self._made if choice not in used]:
            future = self._made.pop(choice)
            if future.done() and future.exception() is None:
                await future.result().aclose()
                log.info("no running flow uses %s%s: closed", choice.provider,
                         f" at {choice.base_url}" if choice.base_url else "")

    async def aclose(self) -> None:
        await self.keep({})
        await self._own.aclose()


def made(choice: Choice, settings: LlmSettings, same: bool) -> Retrying:
    """A provider for ``choice``; the rest of its settings from the environment.
    ``same``: the processor's own provider, at another endpoint or with another
    model (its model setting is kept unless the choice names one)."""
    try:
        module = provider_module(choice.provider)
    except SystemExit as error:
        raise LlmError(f"llm-provider: {error}") from None
    overrides: dict[str, object] = {
        "tg_llm_model": choice.model or (settings.tg_llm_model if same else ""),
        "tg_llm_connections": settings.tg_llm_connections,
        "tg_concurrency": settings.tg_concurrency}
    if choice.base_url:
        field = endpoint_field(module.Settings)
        if field is None:
            raise LlmError(f"llm-base-url: provider {choice.provider} has no endpoint to set")
        overrides[field] = choice.base_url
    try:
        return Retrying(module.make(module.Settings(**overrides)), settings.tg_llm_retries)
    except (SystemExit, ValidationError) as error:
        raise LlmError(f"the flow's LLM ({choice.provider}) cannot be used: {error}") from None


def endpoint_field(settings: type[LlmSettings]) -> str | None:
    """The provider's own setting for where its server is, if it has one."""
    own = [name for name in settings.model_fields if name not in LlmSettings.model_fields]
    return next((name for name in own if name.endswith(ENDPOINT_SUFFIXES)), None)
