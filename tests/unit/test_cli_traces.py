"""What tg-show-trace, tg-list-traces, tg-show-explain-trace and
tg-list-explain-traces print, from the JSON the gateway serves."""
from trustgraph.cli.explain_text import explanation, explanation_list
from trustgraph.cli.trace_tree import tree


def span(span_id, parent, name, start, took, service="gateway", kind="SERVER", **attributes):
    return {"span_id": span_id, "parent_id": parent, "name": name, "service": service,
            "kind": kind, "start_ms": start, "duration_ms": took, "status": "UNSET",
            "status_message": None, "attributes": attributes, "events": []}


TRACE = {"trace_id": "ab" * 16, "start": "2026-01-01T00:00:00.000+00:00", "spans": [
    span("1", None, "websocket graph-rag", 0.0, 100.0, **{"tg.time_to_first_token_ms": 60.0}),
    span("2", "1", "graph-rag", 1.0, 98.0, kind="CLIENT"),
    span("3", "2", "graph-rag", 2.0, 96.0, "graph-rag", **{"tg.time_to_sources_ms": 30.0}),
    span("4", "3", "embeddings", 3.0, 10.0, "embeddings"),
    span("5", "3", "text-completion", 40.0, 58.0, "text-completion",
         **{"gen_ai.response.model": "gpt", "gen_ai.usage.output_tokens": 12}),
    span("6", "gone", "orphan", 50.0, 1.0, "x")]}


def test_a_trace_prints_as_a_tree_with_timings_and_a_timeline():
    lines = tree(TRACE).splitlines()
    assert lines[0] == f"trace {'ab' * 16}  2026-01-01T00:00:00.000+00:00  100.0 ms  6 spans"
    names = [line.split("|", 2)[2][1:] for line in lines[1:]]
    assert names == [
        "websocket graph-rag [gateway]  first token 60.0 ms",
        "└─ graph-rag (call) [gateway]",
        "   └─ graph-rag [graph-rag]  sources 30.0 ms",
        "      ├─ embeddings [embeddings]",
        "      └─ text-completion [text-completion]  model gpt, out 12",
        "orphan [x]"]  # its parent was not kept: shown as a root
    bars = [line.split("|")[1] for line in lines[1:]]
    assert bars[0] == "█" * 24 and bars[4].index("█") == 9  # starts 40 % of the way in
    assert lines[1].split()[:2] == ["0.0", "100.0"]


EXPLAINED = {
    "trace_id": "cd" * 16, "time": "2026-01-01T00:00:00.000+00:00", "service": "graph-rag",
    "user": "alice", "collection": "papers", "question": "Who founded Acme?",
    "optimized_query": "Acme founder", "subqueries": [], "searches": ["Acme founder"],
    "seeds": [{"entity": "urn:acme", "label": "Acme", "score": 0.81234}],
    "chunk_seeds": [], "extra": {},
    "candidates": [
        {"kind": "edge", "id": "d1/c0", "text": "Acme | was founded by | Ada",
         "scores": {"fused": 0.03, "seed": 0.8}, "kept": True, "document_id": "d1"},
        {"kind": "edge", "id": "d2/c3", "text": "Ada | was born in | Leeds",
         "scores": {"fused": 0.01}, "kept": False, "document_id": "d2"}],
    "kept": 1, "considered": 2, "template": "kg-prompt", "prompt_chars": 420,
    "model": "gpt", "in_token": 90, "out_token": 12}


def test_an_explanation_prints_question_seeds_and_candidates_kept_first():
    text = explanation(EXPLAINED, provenance=True)
    assert "Question:   Who founded Acme?" in text and "Rewritten:  Acme founder" in text
    assert "    0.8123  Acme  urn:acme" in text
    assert "Candidates: 2 considered, 1 kept" in text
    kept, dropped = text.index("kept  Acme | was founded by | Ada"), \
        text.index("----  Ada | was born in | Leeds")
    assert kept < dropped and "fused=0.03 seed=0.8" in text
    assert "from document d2, chunk d2/c3" in text
    assert "Prompt:     kg-prompt, 420 characters" in text
    assert f"Trace:      tg-show-trace {'cd' * 16}" in text


def test_explanations_list_as_a_table_named_as_trustgraph_names_the_kinds():
    header, row = explanation_list([{k: EXPLAINED[k] for k in (
        "trace_id", "time", "service", "user", "collection", "question")}]).splitlines()
    assert header.split() == ["trace", "id", "type", "question", "time", "(UTC)",
                              "user/collection"]
    assert row.startswith("cd" * 16) and "GraphRAG" in row and "alice/papers" in row
