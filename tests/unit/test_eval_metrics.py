"""tg-eval's measures against values worked out by hand on a tiny fixture, and its
question files and converters (trustgraph/cli/eval_*.py, evaluate.py)."""
import json
import math

import pytest

from trustgraph.cli import eval_metrics as m
from trustgraph.cli.eval_convert import (
    Question,
    QuestionFileError,
    from_beir,
    from_squad,
    read_questions,
)
from trustgraph.cli.eval_run import Outcome, refusal, score, summary
from trustgraph.cli.evaluate import base_body, misses, pairs, parse, settings, table


def sources(*documents: str | tuple[str, str]) -> list[dict]:
    """One source per (document id, title), or per id with no title."""
    pairs_ = [d if isinstance(d, tuple) else (d, "") for d in documents]
    return [{"id": f"{d}/c0", "document_id": d, "title": t, "text": f"text of {d}"}
            for d, t in pairs_]


# Three questions; by hand (ranks of the expected documents among those cited):
#  q1 expects {A}; cites B, A, C          -> ranks [2]
#  q2 expects {A, D}; cites A, X..V, D    -> ranks [1, 7]
#  q3 expects the title "Q"; cites id9 titled Q -> ranks [1]
FIXTURE = [
    (Question("q1", "one?", ("A",)), sources("B", "A", "B", "C")),
    (Question("q2", "two?", ("A", "D")), sources("A", "X", "Y", "Z", "W", "V", "D")),
    (Question("q3", "three?", ("Q",)), sources(("id9", "Q"))),
]
BY_HAND = {
    "q1": {"recall@1": 0, "recall@5": 1, "recall@10": 1, "mrr": 0.5,
           "ndcg": 1 / math.log2(3)},
    "q2": {"recall@1": 0.5, "recall@5": 0.5, "recall@10": 1, "mrr": 1,
           "ndcg": (1 + 1 / 3) / (1 + 1 / math.log2(3))},
    "q3": {"recall@1": 1, "recall@5": 1, "recall@10": 1, "mrr": 1, "ndcg": 1},
}


def scored() -> list[dict]:
    return [score(q, Outcome(sources=found, answer="", to_sources=0.01 * (n + 1),
                             to_first_token=0.1 * (n + 1), total=1.0, in_token=10,
                             out_token=2))
            for n, (q, found) in enumerate(FIXTURE)]


def test_each_questions_ranking_measures_match_the_hand_computed_values():
    for result in scored():
        for measure, expected in BY_HAND[result["id"]].items():
            assert result[measure] == pytest.approx(expected), (result["id"], measure)
    assert scored()[0]["cited"] == ["B", "A", "C"]  # each document once, first citation


def test_the_summary_averages_them_and_takes_nearest_rank_percentiles():
    result = summary(scored())
    for measure in ("recall@1", "recall@5", "recall@10", "mrr", "ndcg"):
        assert result[measure] == pytest.approx(
            sum(BY_HAND[q][measure] for q in BY_HAND) / 3), measure
    assert result["recall@1"] == pytest.approx(0.5)
    assert result["ndcg"] == pytest.approx(0.816153, abs=1e-6)  # (0.63093 + 0.81753 + 1) / 3
    assert (result["to_sources_p50_ms"], result["to_sources_p95_ms"]) == (20.0, 30.0)
    assert (result["in_token"], result["out_token"], result["errors"]) == (30, 6, 0)
    assert result["exact_match"] is None and result["cited_precision"] is None


def test_an_answer_that_failed_counts_as_an_error_and_scores_nothing():
    failed = score(Question("x", "?", ("A",)), Outcome(error="graph-rag-error: boom"))
    result = summary([*scored(), failed])
    assert (result["questions"], result["errors"]) == (4, 1)
    assert result["recall@1"] == pytest.approx(0.5)  # over the three answered
    assert result["failures"] == {"graph-rag-error: boom": 1}


def test_the_table_says_why_questions_failed_counted_by_error():
    refused = "bad-request: user: Input should be a valid string (HTTP 400)"
    assert refusal(400, '{"error": {"type": "bad-request", "message": '
                        '"user: Input should be a valid string"}}') == refused
    assert refusal(502, "<html>Bad Gateway</html>") == "HTTP 502: <html>Bad Gateway</html>"
    failed = [score(Question(str(n), "?", ("A",)), Outcome(error=refused)) for n in range(3)]
    other = score(Question("4", "?", ("A",)), Outcome(error="timeout: no answer"))
    text = table([{"setting": "mode=document", "summary": summary([*failed, other])}])
    assert text.splitlines()[-3:] == ["Failed questions:", f"mode=document: 3 × {refused}",
                                      "mode=document: 1 × timeout: no answer"]
    assert "Failed questions" not in table([{"setting": "s", "summary": summary(scored())}])


def test_no_user_given_asks_as_the_keys_own_user():
    assert "user" not in base_body(parse(["q.jsonl", "-C", "papers"]))
    assert base_body(parse(["q.jsonl", "-U", "bench", "-C", "papers"]))["user"] == "bench"


def test_answer_measures_follow_squads_normalisation():
    assert m.exact_match("The Eiffel Tower!", ["eiffel tower"]) == 1.0
    assert m.token_f1("The Eiffel Tower!", ["eiffel tower"]) == 1.0
    assert m.exact_match("in Paris France", ["Paris"]) == 0.0
    assert m.token_f1("in Paris France", ["Paris"]) == pytest.approx(0.5)  # P 1/3, R 1
    assert m.token_f1("no", ["Paris", "no"]) == 1.0  # the best reference counts
    assert m.token_f1("", ["Paris"]) == 0.0


def test_cited_precision_reads_the_answers_source_numbers():
    found = sources("A", "B", "A", "C")
    # [1] and [3] are document A, [2] is B: two documents cited, one expected.
    assert m.cited_precision("Yes [1] and [2, 3].", found, {"A"}) == pytest.approx(0.5)
    assert m.cited_precision("No citations at all.", found, {"A"}) is None
    assert m.cited_precision("Out of range [9].", found, {"A"}) is None
    result = score(Question("q", "?", ("A",), ("yes",)), Outcome(sources=found, answer="yes [1]"))
    assert (result["cited_precision"], result["exact_match"], result["f1"]) == (1.0, 1.0, 1.0)


def test_percentiles_and_means():
    assert m.percentile([40, 10, 30, 20], 0.5) == 20
    assert m.percentile([40, 10, 30, 20], 0.95) == 40
    assert m.percentile([], 0.5) is None
    assert m.mean([1, None, 0]) == 0.5 and m.mean([None]) is None


def test_question_files_are_read_and_bad_lines_named(tmp_path):
    good = tmp_path / "q.jsonl"
    good.write_text('{"question": "Who?", "expected": "A", "answer": "Ann"}\n\n'
                    '{"id": "x", "question": "What?", "expected": ["B", "C"], '
                    '"answer": ["b", "bee"]}\n')
    assert read_questions(good) == [Question("1", "Who?", ("A",), ("Ann",)),
                                    Question("x", "What?", ("B", "C"), ("b", "bee"))]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "ok"}\n{"expected": ["A"]}\n')
    with pytest.raises(QuestionFileError, match="line 2: needs a \"question\""):
        read_questions(bad)
    bad.write_text('{"question": "ok", "expected": [1]}\n')
    with pytest.raises(QuestionFileError, match="line 1: \"expected\""):
        read_questions(bad)


def test_beir_qrels_and_squad_json_become_question_lines(tmp_path):
    (tmp_path / "queries.jsonl").write_text(
        '{"_id": "1", "text": "first?"}\n{"_id": "2", "text": "second?"}\n'
        '{"_id": "3", "text": "unjudged?"}\n')
    (tmp_path / "test.tsv").write_text("query-id\tcorpus-id\tscore\n1\td1\t1\n1\td2\t2\n"
                                       "2\td3\t0\n2\td4\t1\n")
    lines = [json.loads(line) for line in
             from_beir(tmp_path / "queries.jsonl", tmp_path / "test.tsv")]
    assert lines == [{"id": "1", "question": "first?", "expected": ["d1", "d2"]},
                     {"id": "2", "question": "second?", "expected": ["d4"]}]
    (tmp_path / "squad.json").write_text(json.dumps({"data": [{"title": "Paris", "paragraphs": [
        {"context": "...", "qas": [
            {"id": "a", "question": "Capital?", "answers": [{"text": "Paris"},
                                                            {"text": "Paris"}]},
            {"id": "b", "question": "Unanswerable?", "answers": [], "is_impossible": True},
            {"id": "c", "question": "River?", "answers": [{"text": "Seine"},
                                                          {"text": "the Seine"}]}]}]}]}))
    assert [json.loads(line) for line in from_squad(tmp_path / "squad.json")] == [
        {"id": "a", "question": "Capital?", "expected": ["Paris"], "answer": "Paris"},
        {"id": "c", "question": "River?", "expected": ["Paris"],
         "answer": ["Seine", "the Seine"]}]


def test_compared_settings_and_thresholds(tmp_path):
    args = parse(["q.jsonl", "-C", "c", "--compare", "retrieval=vector",
                  "retrieval=hybrid,rerank=true", "mode=graph", "--min-recall-at-1", "0.6"])
    labels = [(label, body) for label, body in settings(args)]
    assert labels[1][1]["rerank"] is True and labels[1][1]["retrieval"] == "hybrid"
    assert "doc_limit" not in labels[2][1] and labels[2][1]["mode"] == "graph"
    assert pairs(["doc-limit=5", "flag=true", "name=x"]) == {"doc_limit": 5, "flag": True,
                                                            "name": "x"}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        pairs(["novalue"])
    runs = [{"setting": s, "summary": summary(scored())} for s, _ in labels]
    runs[0]["summary"]["recall@1"] = 0.7
    assert misses(args, runs) == [f"{labels[n][0]}: recall@1 0.5 < 0.6" for n in (1, 2)]
    text = table(runs)
    assert text.splitlines()[0].startswith("| setting | questions | R@1 | R@5 |")
    assert "| retrieval=vector | 3 | 0.700 |" in text and "EM" not in text
