"""GraphRAG's mixed retrieval: the triples ranked by relevance (graph_rag/ranking.py),
the subgraph seeded from the best chunks' entities too (storage/triples/service.py),
and graph-rag asking for both when built with its retrieval settings."""
from types import SimpleNamespace

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
from trustgraph.base import Context
from trustgraph.retrieval.graph_rag import service as graph_rag
from trustgraph.retrieval.graph_rag.ranking import best, by_document, rank_triples
from trustgraph.schema import (
    RDFS_LABEL,
    DocumentEmbeddingsResponse,
    Evidence,
    GraphRagRequest,
    RagResponse,
    ScoredChunk,
    ScoredEntity,
    SubgraphRequest,
    SubgraphResponse,
    Term,
    Triple,
)
from trustgraph.storage.triples.service import mixed_seeds, with_chunk_triples

I = Term.iri  # noqa: E741 (the wire's term kind "i")
REL = I("urn:rel")


def e(s: str, o: str, chunk: str = "d/c0") -> Evidence:
    return Evidence(triple=Triple(s=I(f"urn:{s}"), p=REL, o=I(f"urn:{o}")), chunk_id=chunk,
                    document_id=chunk.split("/")[0])


def seed(name: str, score: float) -> ScoredEntity:
    return ScoredEntity(entity=I(f"urn:{name}"), score=score)


def names(ranked) -> list[str]:
    return [f"{r.evidence.triple.s.i[4:]}-{r.evidence.triple.o.i[4:]}" for r in ranked]


def test_triples_at_the_best_seed_rank_before_those_further_away():
    # a chain: far - x - a(seed 0.9) - b ; c(seed 0.2) - d
    triples = [e("far", "x"), e("x", "a"), e("a", "b"), e("c", "d")]
    ranked = rank_triples(triples, [seed("a", 0.9), seed("c", 0.2)], {})
    assert names(ranked)[:2] in (["x-a", "a-b"], ["a-b", "x-a"])
    assert names(ranked).index("far-x") > 1
    best = ranked[0].scores
    assert best["hops"] == 0 and best["seed"] == 0.9 and best["pagerank"] > 0
    assert "chunk" not in best


def test_a_triple_from_a_chunk_that_matches_the_question_outranks_its_neighbours():
    triples = [e("a", "b", "d1/c0"), e("a", "c", "d1/c0"), e("c", "z", "d2/c3")]
    ranked = rank_triples(triples, [seed("a", 0.5)], {"d2/c3": 1})
    assert names(ranked)[0] == "c-z" and ranked[0].scores["chunk"] == 1
    assert rank_triples([], [seed("a", 0.5)], {}) == []


def test_triples_are_grouped_by_document_best_matching_documents_first():
    triples = [e("a", "b", "d1/c0"), e("b", "c", "d3/c1"), e("c", "d", "d2/c4"),
               e("d", "e", "d1/c2"), e("e", "f", "d3/c0")]
    ranked = rank_triples(triples, [seed("a", 0.9)], {})
    order = [r.evidence.document_id for r in by_document(ranked, {"d2": 1, "d3": 2})]
    assert order[:3] == ["d2", "d3", "d3"] and order[3:] == ["d1", "d1"]
    # Within a document, and among documents no chunk matched, the ranked order holds.
    assert by_document(ranked, {}) == sorted(
        ranked, key=lambda r: [x.evidence.document_id for x in ranked].index(
            r.evidence.document_id))


def test_the_best_triples_hold_each_document_the_chunk_search_found():
    triples = [e("a", "b", "d1/c0"), e("b", "c", "d1/c1"), e("c", "d", "d3/c0"),
               e("d", "e", "d4/c0"), e("e", "f", "d2/c0")]
    ranked = rank_triples(triples, [seed("a", 0.9)], {})
    order = [r.evidence.document_id for r in ranked]
    assert order == ["d1", "d1", "d3", "d4", "d2"]  # the chain, nearest the seed first
    # d2 and d4 were found by the chunk search: their best triples stay, d2's first
    # if only one may; the rest is the best of the others; the ranked order holds.
    kept = [r.evidence.document_id for r in best(ranked, 3, {"d2": 1, "d4": 2})]
    assert kept == ["d1", "d4", "d2"]
    assert [r.evidence.document_id for r in best(ranked, 1, {"d2": 1, "d4": 2})] == ["d2"]
    assert best(ranked, 3, {}) == ranked[:3]


def triple(s: str, o: str) -> Triple:
    return Triple(s=I(f"urn:{s}"), p=REL, o=I(f"urn:{o}"))


def test_chunk_entities_take_at_most_half_the_seed_budget_each_chunk_in_turn():
    found = {"d/c1": [triple("p", "q"), triple("q", "r")], "d/c2": [triple("s", "a")]}
    seeds = [I(f"urn:{n}") for n in "abcdef"]
    request = SubgraphRequest(seeds=seeds, max_entities=6, seed_chunks=["d/c2", "d/c1"],
                              user="u", collection="c")
    mixed = mixed_seeds(request, found)
    # c2's entities a, s; c1's p, q, r: in turn a, p, s, q, r; 3 of the 6 places.
    assert [t.i[4:] for t in mixed] == ["a", "b", "c", "p", "s", "d", "e", "f"]
    plain = SubgraphRequest(seeds=seeds, max_entities=6)
    assert mixed_seeds(plain, found) == seeds


def test_the_matched_chunks_own_triples_join_the_expansion_within_its_budget():
    label = Triple(s=I("urn:p"), p=I(RDFS_LABEL), o=Term.literal("P"))
    mention = Triple(s=I("urn:p"), p=I("urn:tg:mentioned-in"), o=I("urn:tg:chunk:d/c1"))
    found = {"d/c1": [label, mention, triple("p", "q"), triple("q", "r"), triple("r", "s")],
             "d/c2": [triple("d", "e"), triple("x", "y"), triple("y", "z")],
             "d/c3": [triple("m", "n")]}
    expanded = [triple("a", "b"), triple("b", "c"), triple("c", "d"), triple("d", "e"),
                triple("e", "f")]
    request = SubgraphRequest(seeds=[I("urn:a")], max_subgraph_size=8, triple_limit=2,
                              seed_chunks=["d/c2", "d/c1", "d/c3"])
    # Half the budget for the chunks' own, each chunk's first then each one's second
    # (at most its triple_limit): c2's d-e, though the expansion reached it past
    # where its share ends; a label or provenance triple is no statement and takes no
    # place. The
    # expansion's first four (without d-e) before them.
    assert with_chunk_triples(expanded, request, found) == [
        triple("a", "b"), triple("b", "c"), triple("c", "d"), triple("e", "f"),
        triple("d", "e"), triple("p", "q"), triple("m", "n"), triple("x", "y")]
    plain = SubgraphRequest(seeds=[I("urn:a")], max_subgraph_size=4)
    assert with_chunk_triples(expanded, plain, {}) == expanded[:4]


class Lexical:
    def __init__(self, answer: DocumentEmbeddingsResponse) -> None:
        self.answer, self.requests = answer, []

    async def call(self, request, model):
        self.requests.append(request)
        return self.answer


def chunk(id: str, score: float) -> ScoredChunk:
    return ScoredChunk(chunk_id=id, text=f"text of {id}", score=score,
                       document_id=id.split("/")[0], title=f"Title {id.split('/')[0]}")


async def test_mixed_graph_rag_seeds_from_the_best_chunks_and_cites_in_relevance_order():
    embeddings = ScriptedEmbeddings()
    # b-c comes from a chunk the question did not match; s-t, unconnected to the
    # seed, from the chunk that matches it best.
    graph = ScriptedSubgraph(SubgraphResponse(triples=[
        e("a", "b", "d1/c0"), e("b", "c", "d1/c9"), e("s", "t", "d2/c5")], labels={}))
    chunks = DocumentEmbeddingsResponse(chunks=[chunk("d2/c5", 0.8), chunk("d1/c0", 0.3)])
    clients = Clients(
        prompt=ScriptedPrompts(kg_prompt=Answer(deltas=["ok"])), embeddings=embeddings,
        graph_embeddings=ScriptedStore(embeddings, {}, entities((I("urn:a"), 0.9, "A"))),
        document_embeddings=ScriptedStore(embeddings, {}, chunks),
        lexical_search=Lexical(DocumentEmbeddingsResponse(chunks=[chunk("d2/c5", 7.5)])),
        subgraph=graph)
    # tg-start's defaults: hybrid chunk search, mixed graph retrieval.
    settings = graph_rag.GraphRagSettings()
    assert (settings.tg_graph_mix, settings.tg_retrieval) == (True, "hybrid")
    runtime = SimpleNamespace(settings=settings)
    [service] = graph_rag.SPEC.services(runtime)
    request = GraphRagRequest(query="q", max_subgraph_size=2, user="u", collection="c")
    [record] = [r async for r in sent(RagResponse, service.handler(request, Context(
        id="t", flow="default", clients=clients)))]
    [asked] = graph.requests
    assert asked.seed_chunks == ["d2/c5", "d1/c0"] and asked.max_subgraph_size == 4
    # The question embedded once, its vector searched for entities and for chunks.
    assert embeddings.requests == [["q"]]
    # The best two of three, the document of the best-matching chunk (d2) first.
    assert [s.id for s in record.sources] == ["d2/c5", "d1/c0"]
    best = record.sources[0]
    assert (best.title, best.document_id, best.scores["chunk"]) == ("Title d2", "d2", 1)
    assert set(best.scores) >= {"seed", "hops", "pagerank", "fused"}


async def test_graph_rag_with_graph_mix_off_retrieves_plainly(monkeypatch):
    """TG_GRAPH_MIX=false: no chunk search, no chunk seeds, the subgraph asked for
    ``max-subgraph-size`` triples as before mixed retrieval."""
    embeddings = ScriptedEmbeddings()
    graph = ScriptedSubgraph(SubgraphResponse(triples=[e("a", "b", "d1/c0")], labels={}))
    clients = Clients(  # no document-embeddings or lexical-search to ask
        prompt=ScriptedPrompts(kg_prompt=Answer(deltas=["ok"])), embeddings=embeddings,
        graph_embeddings=ScriptedStore(embeddings, {}, entities((I("urn:a"), 0.9, "A"))),
        subgraph=graph)
    monkeypatch.setenv("TG_GRAPH_MIX", "false")
    settings = graph_rag.GraphRagSettings()
    assert not settings.tg_graph_mix
    [service] = graph_rag.SPEC.services(SimpleNamespace(settings=settings))
    request = GraphRagRequest(query="q", max_subgraph_size=2, user="u", collection="c")
    [record] = [r async for r in sent(RagResponse, service.handler(request, Context(
        id="t", flow="default", clients=clients)))]
    [asked] = graph.requests
    assert not asked.seed_chunks and asked.max_subgraph_size == 2
    assert [s.id for s in record.sources] == ["d1/c0"]


async def test_graph_sources_cite_document_and_heading_never_a_chunk_id_as_a_statement():
    """Provenance edges (entity mentioned in a chunk, chunk in a document) are where
    a statement came from, not statements: the LLM never sees them, and each source
    names its document's title and its chunk's heading path (the store's labels)."""
    from trustgraph.extract.vocabulary import IN_DOCUMENT, MENTIONED_IN, chunk_iri, document_iri
    fact = Evidence(triple=Triple(s=I("urn:a"), p=I("urn:tg:rel:is-a"), o=I("urn:b")),
                    chunk_id="d1/c2", document_id="d1")
    mention = Evidence(triple=Triple(s=I("urn:a"), p=I(MENTIONED_IN), o=I(chunk_iri("d1/c2"))),
                       chunk_id="d1/c2", document_id="d1")
    inside = Evidence(triple=Triple(s=I(chunk_iri("d1/c2")), p=I(IN_DOCUMENT),
                                    o=I(document_iri("d1"))), chunk_id="d1/c2", document_id="d1")
    embeddings = ScriptedEmbeddings()
    labels = {"urn:a": "Cockatoo", "urn:b": "parrot", "urn:tg:rel:is-a": "is a",
              document_iri("d1"): "Cockatoo", chunk_iri("d1/c2"): "Cockatoo > Breeding"}
    prompts = ScriptedPrompts(kg_prompt=Answer(deltas=["ok"]))
    clients = Clients(
        prompt=prompts, embeddings=embeddings,
        graph_embeddings=ScriptedStore(embeddings, {}, entities((I("urn:a"), 0.9, "A"))),
        subgraph=ScriptedSubgraph(SubgraphResponse(triples=[mention, fact, inside],
                                                   labels=labels)))
    [service] = graph_rag.SPEC.services(SimpleNamespace(settings=None))
    request = GraphRagRequest(query="q", user="u", collection="c")
    [record] = [r async for r in sent(RagResponse, service.handler(request, Context(
        id="t", flow="default", clients=clients)))]
    [source] = record.sources
    assert source.text == "Cockatoo | is a | parrot"
    assert (source.title, source.header_titles, source.id) == (
        "Cockatoo", ["Cockatoo", "Breeding"], "d1/c2")
    [asked] = [r for r in prompts.asked if r.id == "kg-prompt"]
    assert asked.variables["knowledge"] == [{"s": "Cockatoo", "p": "is a", "o": "parrot"}]


def test_within_a_document_a_definition_leads_and_co_occurrence_trails():
    from trustgraph.extract.vocabulary import CO_OCCURS, DEFINITION
    said = [Evidence(triple=Triple(s=I("urn:a"), p=I(CO_OCCURS), o=I("urn:b")),
                     chunk_id="d1/c0", document_id="d1"),
            e("a", "c", "d1/c0"),
            Evidence(triple=Triple(s=I("urn:a"), p=I(DEFINITION), o=Term.literal("An A.")),
                     chunk_id="d1/c0", document_id="d1")]
    ranked = rank_triples(said, [seed("a", 0.9)], {})
    kinds = [r.evidence.triple.p.i for r in by_document(ranked, {"d1": 1})]
    assert kinds == [DEFINITION, "urn:rel", CO_OCCURS]
