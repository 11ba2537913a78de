"""The FTS5 lexical index leaves out words in over half of a scope's chunks: BM25
weighs them at ~0 and scoring every row they match is what costs (lexical.py)."""
from trustgraph.storage.vectors.lexical import COMMON_WORDS_SCORED, Fts5Index, LexicalChunk

SCOPE = ("alice", "papers")


def chunk(n: int, text: str) -> LexicalChunk:
    return LexicalChunk(chunk_id=f"doc{n}#c0", document=f"doc{n}", text=text)


async def test_common_words_are_passed_over_for_the_rare_ones(tmp_path):
    index = Fts5Index(tmp_path / "lexical.sqlite")
    await index.upsert(*SCOPE, [chunk(n, "engine pump valve") for n in range(6)]
                       + [chunk(6, "engine turbopump")])
    found = await index.search(*SCOPE, "engine turbopump", 10)
    assert [m.chunk_id for m in found] == ["doc6#c0"]
    # Only common words, in a small scope: still matched, every row scored.
    assert len(await index.search(*SCOPE, "engine", 10)) == 7
    await index.close()


async def test_a_question_of_only_common_words_finds_nothing_in_a_large_scope(tmp_path):
    index = Fts5Index(tmp_path / "lexical.sqlite")
    size = COMMON_WORDS_SCORED + 1
    await index.upsert(*SCOPE, [chunk(n, f"engine pump part{n}") for n in range(size)])
    assert await index.search(*SCOPE, "engine pump", 10) == []
    [match] = await index.search(*SCOPE, "which engine has part7?", 10)
    assert match.chunk_id == "doc7#c0"
    await index.close()
