"""The graph-rag service (trustgraph/retrieval/graph_rag/service.py) with scripted
services around it: which entities seed the subgraph, what the subgraph request asks,
how triples read to the LLM, and what is cited. The frame sequence it shares with
document-rag is in test_rag_answer.py; the scripted services are in
tests/support/rag_clients.py."""
import pytest

from tests.support.rag_clients import (
    Answer,
    Clients,
    ScriptedEmbeddings,
    ScriptedPrompts,
    ScriptedStore,
    ScriptedSubgraph,
    entities,
    sent,
)
from trustgraph.base import Context, HandledError, ProcessorSettings, ServiceError
from trustgraph.retrieval.graph_rag import service as graph_rag
from trustgraph.schema import (
    RDFS_LABEL,
    Error,
    Evidence,
    GraphRagRequest,
    RagResponse,
    SubgraphResponse,
    Term,
    Triple,
)

I, L = Term.iri, Term.literal  # noqa: E741 (the wire's term kinds "i", "l")
QUESTION = "Who founded Acme?"
ACME, ANN, FOUNDED = I("urn:e:acme"), I("urn:e:ann"), I("urn:rel:founded-by")


def evidence(s: Term, p: Term, o: Term, chunk: str = "doc-1/c0",
             document: str = "doc-1") -> Evidence:
    return Evidence(triple=Triple(s=s, p=p, o=o), chunk_id=chunk, document_id=document)


SUBGRAPH = SubgraphResponse(
    triples=[evidence(ACME, FOUNDED, ANN),
             evidence(ACME, I(RDFS_LABEL), L("Acme Corp")),
             evidence(ANN, I("urn:rel:born"), L("1970"), chunk="doc-2/c4", document="doc-2"),
             evidence(I("urn:e:unlabelled"), FOUNDED, ACME)],
    labels={ACME.i: "Acme Corp", FOUNDED.i: "founded by"})


class Rig:
    def __init__(self, found: dict | None = None, default=None,
                 subgraph: SubgraphResponse | Exception = SUBGRAPH, **prompts: Answer):
        self.prompts = ScriptedPrompts(kg_prompt=Answer(deltas=["Ann ", "did."]), **prompts)
        self.embeddings = ScriptedEmbeddings()
        self.store = ScriptedStore(self.embeddings, found or {}, default or entities(
            (ACME, 0.9, "Acme"), (ANN, 0.8, "Ann Smith")))
        self.subgraph = ScriptedSubgraph(subgraph)
        self.clients = Clients(prompt=self.prompts, embeddings=self.embeddings,
                               graph_embeddings=self.store, subgraph=self.subgraph)
        [self.service] = graph_rag.SPEC.services(ProcessorSettings())

    async def records(self, **request) -> list[RagResponse]:
        request = GraphRagRequest(**{"query": QUESTION, **request})
        ctx = Context(id="t", flow="default", clients=self.clients)
        return [record async for record in sent(RagResponse,
                                                self.service.handler(request, ctx))]

    def knowledge(self) -> list[dict]:
        [asked] = [r for r in self.prompts.asked if r.id == "kg-prompt"]
        assert asked.variables["query"] == QUESTION
        return asked.variables["knowledge"]


async def test_the_nearest_entities_seed_one_subgraph_request_with_the_request_limits():
    rig = Rig()
    await rig.records(user="alice", collection="papers", entity_limit=7, triple_limit=9,
                      max_subgraph_size=99, max_path_length=3)
    [(searched, search)] = rig.store.requests
    assert (searched, search.limit, search.user, search.collection) == (
        QUESTION, 7, "alice", "papers")
    [request] = rig.subgraph.requests
    assert request.seeds == [ACME, ANN]
    assert (request.user, request.collection) == ("alice", "papers")
    assert (request.max_entities, request.triple_limit, request.max_subgraph_size,
            request.max_path_length) == (7, 9, 99, 3)


async def test_triples_read_with_labels_and_each_one_used_is_a_source():
    rig = Rig()
    metadata, *deltas, final = await rig.records(streaming=True)
    # The store's label first, then the label the entity was embedded with, else the
    # IRI; literals as they are. The label triple itself is not a statement.
    expected = [("Acme Corp", "founded by", "Ann Smith"),
                ("Ann Smith", "urn:rel:born", "1970"),
                ("urn:e:unlabelled", "founded by", "Acme Corp")]
    assert rig.knowledge() == [{"s": s, "p": p, "o": o} for s, p, o in expected]
    assert [s.text for s in metadata.sources] == [" | ".join(e) for e in expected]
    born = metadata.sources[1]
    assert (born.s, born.p, born.o) == (ANN, I("urn:rel:born"), L("1970"))
    assert (born.id, born.document_id, born.distance) == ("doc-2/c4", "doc-2", None)
    assert final.sources == metadata.sources
    assert "".join(r.chunk for r in deltas) == "Ann did."


@pytest.mark.parametrize("limit, seeds", [(2, ["acme", "bob"]), (3, ["acme", "bob", "ann"])])
async def test_each_search_contributes_its_nearest_seeds_each_entity_once(limit, seeds):
    bob = I("urn:e:bob")
    rig = Rig(found={
        QUESTION: entities((ACME, 0.9, ""), (ANN, 0.85, "")),
        "Who is Bob?": entities((bob, 0.4, ""), (ANN, 0.3, "")),
    }, query_decompose=Answer(object=["Who is Bob?"]))
    await rig.records(subqueries=True, entity_limit=limit)
    assert sorted(text for text, _ in rig.store.requests) == sorted([QUESTION, "Who is Bob?"])
    assert rig.subgraph.requests[0].seeds == [I(f"urn:e:{name}") for name in seeds]


async def test_an_empty_graph_is_answered_from_no_statements_without_a_subgraph_request():
    rig = Rig(default=entities())
    [record] = await rig.records()
    assert rig.subgraph.requests == []
    assert rig.knowledge() == []
    assert record.sources == [] and record.response == "Ann did."


async def test_a_failed_subgraph_request_is_a_graph_rag_error_naming_the_step():
    rig = Rig(subgraph=ServiceError(Error(type="no-service", message="nobody serves it")))
    with pytest.raises(HandledError) as failure:
        await rig.records(streaming=True)
    assert (failure.value.type, failure.value.message) == (
        "graph-rag-error", "expanding the subgraph failed: no-service: nobody serves it")


def test_the_service_is_named_and_typed_for_the_bus():
    [service] = graph_rag.SPEC.services(ProcessorSettings())
    assert (service.name, service.failure_type) == ("graph-rag", "graph-rag-error")
    assert service.request is GraphRagRequest and service.response is RagResponse
    assert set(graph_rag.SPEC.uses) == {"prompt", "embeddings", "graph-embeddings", "subgraph",
                                        "document-embeddings", "lexical-search"}
