"""Reciprocal-rank fusion (retrieval/fusion.py) and the retrieval settings."""
from trustgraph.base import ProcessorSettings
from trustgraph.retrieval.fusion import Ranking, fuse
from trustgraph.retrieval.search import Fusion, RetrievalSettings


def ids(fused) -> list[str]:
    return [entry.item[0] for entry in fused]


def fused(rankings, **options):
    return fuse(rankings, key=lambda item: item[0], score=lambda item: item[1], **options)


def test_an_item_both_retrievers_rank_well_beats_one_only_one_ranks_first():
    vector = Ranking("vector", [("a", 0.9), ("b", 0.8), ("c", 0.7)])
    lexical = Ranking("lexical", [("c", 12.0), ("b", 9.0), ("d", 3.0)])
    result = fused([vector, lexical], k=60)
    assert ids(result) == ["c", "b", "a", "d"]  # 1/63 + 1/61 > 2/62 > 1/61 > 1/63
    c, b = result[:2]
    assert (c.scores, c.ranks) == ({"vector": 0.7, "lexical": 12.0}, {"vector": 3, "lexical": 1})
    assert abs(b.fused - 2 / 62) < 1e-12


def test_weights_and_k_decide_between_the_retrievers():
    vector = Ranking("vector", [("a", 0.9), ("b", 0.5)])
    lexical = Ranking("lexical", [("b", 5.0), ("a", 1.0)])
    assert ids(fused([vector, lexical], weights={"lexical": 2.0})) == ["b", "a"]
    assert ids(fused([vector, lexical], weights={"vector": 2.0})) == ["a", "b"]
    assert ids(fused([vector, lexical], limit=1)) == ["a"]  # a tie: the first seen


def test_an_item_keeps_its_best_score_per_retriever_across_search_texts():
    first = Ranking("vector", [("a", 0.4)], text=0)
    second = Ranking("vector", [("a", 0.7)], text=1)
    [a] = fused([first, second])
    assert a.scores == {"vector": 0.7}


def test_retrieval_settings_default_to_hybrid_and_read_each_variable(monkeypatch):
    assert Fusion.of(RetrievalSettings()) == Fusion(mode="hybrid")  # k 60, weights 1
    monkeypatch.setenv("TG_RETRIEVAL", "vector")
    assert Fusion.of(RetrievalSettings()) == Fusion(mode="vector")
    assert Fusion.of(ProcessorSettings()).mode == "vector"  # built as before: as before
    monkeypatch.setenv("TG_RETRIEVAL", "lexical")
    monkeypatch.setenv("TG_RRF_K", "10")
    monkeypatch.setenv("TG_RRF_LEXICAL_WEIGHT", "0.5")
    fusion = Fusion.of(RetrievalSettings())
    assert (fusion.mode, fusion.k, fusion.weights) == (
        "lexical", 10.0, {"vector": 1.0, "lexical": 0.5})
