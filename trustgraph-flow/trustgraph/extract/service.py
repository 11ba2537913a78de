"""The extract processor: one stage reading ``chunks`` (subscription ``extract``) and
sending what each chunk adds to the knowledge graph as ``ChunkTriples`` to
``triples`` and ``ChunkEntities`` to ``entities``.

The extractor is chosen per flow: by its ``extractor`` parameter, else by
``TG_EXTRACTOR``: ``nounphrase`` (the default, no LLM needed), ``keyphrase`` (YAKE key
phrases and co-occurrence, the earlier default) or ``llm`` for every flow, or per
flow as ``default=nounphrase,papers=llm`` (a bare name sets the default for flows not
listed).
"""
from collections.abc import Awaitable, Callable
from typing import Literal

from pydantic import field_validator

from trustgraph.base import (
    FlowParameters,
    ProcessorSettings,
    ProcessorSpec,
    PromptClient,
    Stage,
    StageContext,
)
from trustgraph.schema import Chunk

from .graph import ChunkGraph
from .keyphrase import KeyphraseExtractor
from .llm import llm_graph
from .nounphrase import NounPhraseExtractor

NAME = "extract"
EXTRACTORS = ("nounphrase", "keyphrase", "llm")
DEFAULT = "nounphrase"


class ExtractSettings(ProcessorSettings):
    tg_extractor: str = DEFAULT
    tg_noun_phrases: int = 30  # nounphrase: entities per chunk at most (title included)
    tg_noun_phrases_embedded: int = 10  # nounphrase: of those, sent on for a vector
    tg_keyphrases: int = 10  # keyphrase: key phrases (entities) per chunk at most
    # Words per key phrase at most: 3 also finds "Bank of England", with more noise.
    tg_keyphrase_words: int = 2
    tg_keyphrase_language: str = "en"  # YAKE's stop words; unknown languages use none

    @field_validator("tg_extractor")
    @classmethod
    def _known(cls, value: str) -> str:
        extractor_choice(value)
        return value


def extractor_choice(value: str) -> dict[str, str]:
    """``TG_EXTRACTOR`` as {flow: extractor}; the key "" is the default."""
    choice = {"": DEFAULT}
    for entry in filter(None, (e.strip() for e in value.split(","))):
        flow, _, name = entry.rpartition("=")
        flow, name = flow.strip(), name.strip()
        if name not in EXTRACTORS:
            raise ValueError(f"unknown extractor {name!r} in {value!r}; known: "
                             f"{', '.join(EXTRACTORS)}")
        choice["" if flow == "default" else flow] = name
    return choice


def local_extractors(settings: ExtractSettings, names: set[str]
                     ) -> dict[str, Callable[[Chunk], Awaitable[ChunkGraph]]]:
    """The LLM-free extractors among ``names``, each built once: name → extract."""
    found: dict[str, Callable[[Chunk], Awaitable[ChunkGraph]]] = {}
    if "nounphrase" in names:
        found["nounphrase"] = NounPhraseExtractor(settings.tg_noun_phrases,
                                                  settings.tg_noun_phrases_embedded).extract
    if "keyphrase" in names:
        found["keyphrase"] = KeyphraseExtractor(
            settings.tg_keyphrases, settings.tg_keyphrase_words,
            settings.tg_keyphrase_language).extract
    return found


class ExtractParameters(FlowParameters):
    extractor: Literal["nounphrase", "keyphrase", "llm"] | None = None


def extract_stage(settings: ExtractSettings) -> Stage:
    choice = extractor_choice(settings.tg_extractor)
    local = local_extractors(settings, set(choice.values()))

    async def extract(chunk: Chunk, ctx: StageContext) -> None:
        name = ctx.parameters.of(ExtractParameters).extractor or \
            choice.get(ctx.flow, choice[""])
        if name not in local and name != "llm":  # a flow's choice, built on first use
            local.update(local_extractors(settings, {name}))
        if name == "llm":
            graph = await llm_graph(chunk, PromptClient(await ctx.clients.get("prompt")))
        else:
            graph = await local[name](chunk)
        triples, entities = graph.sent()
        await ctx.emit("triples", triples)
        await ctx.emit("entities", entities)

    return Stage("chunks", Chunk, extract, subscription=NAME)


SPEC = ProcessorSpec(NAME, ExtractSettings, lambda runtime: [extract_stage(runtime.settings)])
