"""The extract processor: one stage reading ``chunks`` (subscription ``extract``) and
sending what each chunk adds to the knowledge graph as ``ChunkTriples`` to
``triples`` and ``ChunkEntities`` to ``entities``.

The extractor is chosen per flow by ``TG_EXTRACTOR``: ``keyphrase`` (the default, no
LLM needed) or ``llm`` for every flow, or per flow as ``default=keyphrase,papers=llm``
(a bare name sets the default for flows not listed).
"""
from pydantic import field_validator

from trustgraph.base import ProcessorSettings, ProcessorSpec, PromptClient, Stage, StageContext
from trustgraph.schema import Chunk

from .keyphrase import KeyphraseExtractor
from .llm import llm_graph

NAME = "extract"
EXTRACTORS = ("keyphrase", "llm")


class ExtractSettings(ProcessorSettings):
    tg_extractor: str = "keyphrase"
    tg_keyphrases: int = 10  # key phrases (entities) per chunk at most
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
    choice = {"": "keyphrase"}
    for entry in filter(None, (e.strip() for e in value.split(","))):
        flow, _, name = entry.rpartition("=")
        flow, name = flow.strip(), name.strip()
        if name not in EXTRACTORS:
            raise ValueError(f"unknown extractor {name!r} in {value!r}; known: "
                             f"{', '.join(EXTRACTORS)}")
        choice["" if flow == "default" else flow] = name
    return choice


def extract_stage(settings: ExtractSettings) -> Stage:
    choice = extractor_choice(settings.tg_extractor)
    keyphrases = None
    if "keyphrase" in choice.values():
        keyphrases = KeyphraseExtractor(settings.tg_keyphrases, settings.tg_keyphrase_words,
                                        settings.tg_keyphrase_language)

    async def extract(chunk: Chunk, ctx: StageContext) -> None:
        if choice.get(ctx.flow, choice[""]) == "llm":
            graph = await llm_graph(chunk, PromptClient(await ctx.clients.get("prompt")))
        else:
            assert keyphrases is not None  # made whenever a flow chose it
            graph = await keyphrases.extract(chunk)
        if records := graph.records():
            triples, entities = records
            await ctx.emit("triples", triples)
            await ctx.emit("entities", entities)

    return Stage("chunks", Chunk, extract, subscription=NAME)


SPEC = ProcessorSpec(NAME, ExtractSettings, lambda runtime: [extract_stage(runtime.settings)])
