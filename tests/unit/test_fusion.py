"""Reciprocal-rank fusion (retrieval/fusion.py) and the retrieval settings."""
import pytest

from trustgraph.base import ProcessorSettings
from trustgraph.retrieval.fusion import Ranking, fuse, fuse_scores
from trustgraph.retrieval.search import Fusion, RetrievalSettings
from trustgraph.schema import ScoredChunk


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
    assert Fusion.of(RetrievalSettings()) == Fusion(mode="hybrid")  # scores, share 0.5
    monkeypatch.setenv("TG_RETRIEVAL", "vector")
    assert Fusion.of(RetrievalSettings()) == Fusion(mode="vector")
    assert Fusion.of(ProcessorSettings()).mode == "vector"  # built as before: as before
    monkeypatch.setenv("TG_RETRIEVAL", "lexical")
    monkeypatch.setenv("TG_RRF_K", "10")
    monkeypatch.setenv("TG_RRF_LEXICAL_WEIGHT", "0.5")
    fusion = Fusion.of(RetrievalSettings())
    assert (fusion.mode, fusion.k, fusion.weights) == (
        "lexical", 10.0, {"vector": 1.0, "lexical": 0.5})


def test_score_fusion_sums_each_rankings_min_max_normalised_scores():
    vector = Ranking("vector", [("a", 0.9), ("b", 0.8), ("c", 0.5)])
    lexical = Ranking("lexical", [("c", 20.0), ("b", 4.0), ("d", 2.0)])
    result = fuse_scores([vector, lexical], key=lambda i: i[0], score=lambda i: i[1],
                         weights={"vector": 0.6, "lexical": 0.4})
    # a: 0.6·1; b: 0.6·0.75 + 0.4·(2/18); c: 0.6·0 + 0.4·1; d: 0.4·0
    assert ids(result) == ["a", "b", "c", "d"]
    expected = {"a": 0.6, "b": 0.45 + 0.4 * 2 / 18, "c": 0.4, "d": 0.0}
    assert all(abs(e.fused - expected[e.item[0]]) < 1e-12 for e in result)
    assert result[2].scores == {"vector": 0.5, "lexical": 20.0}
    assert result[2].ranks == {"vector": 3, "lexical": 1}


def test_search_fuses_by_the_method_its_settings_name():
    # Ranks put z second: first for BM25. Scores see it is first by far for BM25
    # and last by far for the vectors, where y is a hair behind x.
    def chunks(retriever, pairs):
        return Ranking(retriever, [ScoredChunk(chunk_id=i, text=i, score=s) for i, s in pairs])
    rankings = [chunks("vector", [("x", 0.90), ("y", 0.89), ("z", 0.10)]),
                chunks("lexical", [("z", 40.0), ("x", 2.0), ("y", 1.0)])]
    by_rank = Fusion(method="rrf").merge(rankings)
    by_score = Fusion(method="scores", vector_share=0.6).merge(rankings)
    assert [e.item.chunk_id for e in by_rank] == ["x", "z", "y"]
    assert [e.item.chunk_id for e in by_score] == ["x", "y", "z"]
    assert by_score[2].scores == {"vector": 0.10, "lexical": 40.0}


def test_score_fusion_of_equal_scores_and_of_an_empty_ranking():
    same = Ranking("vector", [("a", 0.5), ("b", 0.5)])
    empty = Ranking("lexical", [])
    result = fuse_scores([same, empty], key=lambda i: i[0], score=lambda i: i[1])
    assert [(e.item[0], e.fused) for e in result] == [("a", 1.0), ("b", 1.0)]


def test_retrieval_settings_choose_the_fusion_method(monkeypatch):
    assert Fusion.of(RetrievalSettings()).method == "scores"
    assert Fusion.of(RetrievalSettings()).vector_share == 0.5
    monkeypatch.setenv("TG_FUSION", "rrf")
    monkeypatch.setenv("TG_FUSION_VECTOR_SHARE", "0.3")
    fusion = Fusion.of(RetrievalSettings())
    assert (fusion.method, fusion.vector_share) == ("rrf", 0.3)
    monkeypatch.setenv("TG_FUSION", "sum")
    with pytest.raises(ValueError):
        RetrievalSettings()
