"""The extract processor on a real pulsar-lite broker: Chunk records in on ``chunks``,
ChunkTriples out on ``triples`` and ChunkEntities on ``entities``.

One processor serves two flows: one with the LLM-free extractor, one with the LLM
extractor going through the real prompt service (shipped templates, their JSON
schemas checked there) to a scripted text-completion service that answers each
template with JSON chosen from the chunk's text, or with prose the prompt service
cannot parse.
"""
import json
import uuid
from collections.abc import AsyncIterator

import pytest

from tests.support.waiting import eventually, serving
from trustgraph.base import Context, Processor, ProcessorSettings, ProcessorSpec, Service, Stage
from trustgraph.base.stage import Emitters
from trustgraph.extract.service import ExtractSettings, extract_stage
from trustgraph.extract.vocabulary import (
    CO_OCCURS,
    DEFINITION,
    LABEL,
    MENTIONED_IN,
    chunk_iri,
    entity_iri,
    relation_iri,
)
from trustgraph.prompt.service import SPEC as PROMPT_SPEC
from trustgraph.prompt.service import PromptSettings
from trustgraph.pubsub import Bus
from trustgraph.schema import (
    Chunk,
    ChunkEntities,
    ChunkTriples,
    DocumentRef,
    PromptRequest,
    PromptResponse,
    Term,
    TextCompletionRequest,
    TextCompletionResponse,
    Triple,
)

PROSE = [
    "Harbour Robotics builds autonomous underwater vehicles for offshore wind farms. "
    "The underwater vehicles inspect turbine foundations and subsea cables near Bergen.",
    "Ingrid Solberg founded Harbour Robotics in Bergen. Before Harbour Robotics she "
    "designed sonar systems for research vessels in the North Sea.",
]
GOOD = "Marie Curie was born in Warsaw."
BROKEN = "Pierre Curie worked in Paris."  # the scripted model garbles its relationships

ANSWERS = {
    ("definitions", GOOD): [{"entity": "Marie Curie", "definition": "A physicist."}],
    ("relationships", GOOD): [{"subject": "Marie Curie", "predicate": "was born in",
                               "object": "Warsaw", "object-entity": True}],
    ("definitions", BROKEN): [{"entity": "Pierre Curie", "definition": "A physicist."}],
}


async def scripted_llm(request: TextCompletionRequest, ctx: Context
                       ) -> AsyncIterator[TextCompletionResponse]:
    template = ("definitions" if "find the entities it defines" in request.prompt
                else "relationships")
    text = request.prompt.rsplit("Text:\n", 1)[1].strip()
    answer = ANSWERS.get((template, text))
    yield TextCompletionResponse(
        response=json.dumps(answer) if answer else "Sure! Here they are: Pierre -> Paris",
        end_of_stream=True, model="scripted")


class Collected:
    def __init__(self) -> None:
        self.triples: dict[tuple[str, str], ChunkTriples] = {}
        self.entities: dict[tuple[str, str], ChunkEntities] = {}

    def stages(self) -> list[Stage]:
        async def on_triples(record: ChunkTriples, ctx) -> None:
            self.triples[ctx.flow, record.chunk_id] = record

        async def on_entities(record: ChunkEntities, ctx) -> None:
            self.entities[ctx.flow, record.chunk_id] = record

        return [Stage("triples", ChunkTriples, on_triples, subscription="extract-test"),
                Stage("entities", ChunkEntities, on_entities, subscription="extract-test")]


def chunks(document: str, texts: list[str]) -> list[Chunk]:
    ref = DocumentRef(id=document, user="alice", collection="research", title=document)
    return [Chunk(document=ref, id=f"{document}/c{n}", index=n, text=text)
            for n, text in enumerate(texts)]


@pytest.fixture
async def stack(broker):
    keyphrase, llm = (f"{kind}-{uuid.uuid4().hex[:8]}" for kind in ("kp", "llm"))
    url, collected, started = broker.url, Collected(), []
    bus = Bus(url)

    async def start(processor: Processor) -> None:
        await processor.start()
        started.append(processor)

    try:
        await start(Processor(ProcessorSpec("collector", ProcessorSettings,
                                            lambda s: collected.stages()),
                              ProcessorSettings(pulsar_url=url, tg_flows=[keyphrase, llm])))
        await start(Processor(ProcessorSpec("scripted-llm", ProcessorSettings, lambda s: [
            Service("text-completion", TextCompletionRequest, TextCompletionResponse,
                    scripted_llm)]), ProcessorSettings(pulsar_url=url, tg_flows=[llm])))
        await start(Processor(PROMPT_SPEC, PromptSettings(pulsar_url=url, tg_flows=[llm],
                                                    tg_config_wait=0.5)))
        await serving(bus, "prompt", llm, PromptRequest(id="no-such-template"),
                      PromptResponse, timeout=15)
        await start(Processor(ProcessorSpec("extract", ExtractSettings,
                                            lambda runtime: [extract_stage(runtime.settings)]),
                              ExtractSettings(pulsar_url=url, tg_flows=[keyphrase, llm],
                                              tg_extractor=f"{llm}=llm",
                                              tg_request_timeout=10)))
        yield keyphrase, llm, Emitters(bus, keyphrase).emit, Emitters(bus, llm).emit, collected
    finally:
        await bus.close()
        for processor in reversed(started):
            await processor.stop()


def has(record: ChunkTriples, s: str, p: str, o: Term) -> bool:
    return Triple(s=Term.iri(s), p=Term.iri(p), o=o) in record.triples


async def test_chunks_become_triples_and_entities_on_each_flow(stack):
    keyphrase, llm, emit_keyphrase, emit_llm, collected = stack
    prose, facts = chunks("report.txt", PROSE), chunks("curie.txt", [GOOD, BROKEN])
    for chunk in prose:
        await emit_keyphrase("chunks", chunk)
    for chunk in facts:
        await emit_llm("chunks", chunk)
    expected = {(keyphrase, c.id) for c in prose} | {(llm, c.id) for c in facts}
    await eventually(lambda: expected <= set(collected.triples)
                     and expected <= set(collected.entities),
                     "triples and entities of every chunk", timeout=60)

    harbour = entity_iri("Harbour Robotics")
    for chunk in prose:
        triples = collected.triples[keyphrase, chunk.id]
        entities = collected.entities[keyphrase, chunk.id].entities
        assert triples.document == chunk.document  # user and collection travel along
        assert harbour in {e.entity.i for e in entities}
        assert has(triples, harbour, MENTIONED_IN, Term.iri(chunk_iri(chunk.id)))
        # The default extractor (nounphrase): relations worded from the sentence.
        assert not any(t.p.i == CO_OCCURS for t in triples.triples)
    assert has(collected.triples[keyphrase, prose[1].id], entity_iri("Ingrid Solberg"),
               relation_iri("founded"), Term.iri(harbour))

    good, broken = (collected.triples[llm, c.id] for c in facts)
    curie = entity_iri("Marie Curie")
    assert has(good, curie, DEFINITION, Term.literal("A physicist."))
    assert has(good, curie, relation_iri("was born in"), Term.iri(entity_iri("Warsaw")))
    assert [(e.label, e.definition) for e in collected.entities[llm, facts[0].id].entities] \
        == [("Marie Curie", "A physicist."), ("Warsaw", "")]
    # the garbled relationships were skipped; the definitions of that chunk still count
    assert has(broken, entity_iri("Pierre Curie"), LABEL, Term.literal("Pierre Curie"))
    assert not any(t.p.i.startswith("urn:tg:rel:") for t in broken.triples)
    assert not any(t.p.i == CO_OCCURS for t in good.triples + broken.triples)
