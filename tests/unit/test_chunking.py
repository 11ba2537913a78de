"""The recursive, token-aware splitter: sizes in the model's tokens, overlap,
nothing lost, edge cases."""
import random

import pytest

from trustgraph.chunking import MODEL_LIMIT, ModelTokens, WordTokens, chunk_document, split_text
from trustgraph.chunking.context import embedded_text
from trustgraph.decoding import Decoded, Section
from trustgraph.embeddings.minilm.model_files import load_tokenizer

WORDS = ("graph retrieval embedding vector pulsar broker chunk token sentence paragraph "
         "knowledge entity relation query answer model stream record schema topic").split()


MINILM = ModelTokens(load_tokenizer())  # all-MiniLM-L6-v2's, as the decoder counts


def model_count(text: str) -> int:
    return len(MINILM.tokenizer.encode(text, add_special_tokens=False).ids)


def prose(rng: random.Random, paragraphs: int) -> str:
    out = []
    for _ in range(paragraphs):
        sentences = []
        for _ in range(rng.randint(1, 12)):
            words = [rng.choice(WORDS) for _ in range(rng.randint(3, 30))]
            if rng.random() < 0.2:
                words.append("Über-naïve café: état, (x=1), e.g. 3.14%!")
            sentences.append(" ".join(words).capitalize() + rng.choice(".!?"))
        out.append(" ".join(sentences))
    return "\n\n".join(out)


def assert_valid(text: str, chunks, max_tokens: int) -> None:
    """Each chunk is its slice of the text, within the limit in the model's own
    tokens, in order; together they cover every non-space character."""
    covered = bytearray(len(text))
    previous = None
    for i, chunk in enumerate(chunks):
        assert chunk.index == i
        assert chunk.text == text[chunk.start:chunk.end] and chunk.text == chunk.text.strip()
        assert chunk.tokens == model_count(chunk.text) <= max_tokens
        if previous is not None:
            assert previous.start < chunk.start and previous.end < chunk.end
        covered[chunk.start:chunk.end] = b"\x01" * (chunk.end - chunk.start)
        previous = chunk
    lost = [i for i, c in enumerate(text) if not c.isspace() and not covered[i]]
    assert not lost, f"characters not in any chunk at {lost[:10]}"


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("max_tokens,overlap", [(250, 30), (64, 0), (40, 20), (16, 4)])
def test_sizes_overlap_and_coverage_on_prose(seed, max_tokens, overlap):
    text = prose(random.Random(seed), 12)
    chunks = split_text(text, MINILM, max_tokens, overlap)
    assert len(chunks) > 1
    assert_valid(text, chunks, max_tokens)


def test_consecutive_chunks_share_at_most_overlap_tokens():
    text = prose(random.Random(7), 20)
    chunks = split_text(text, MINILM, 100, 20)
    for before, after in zip(chunks, chunks[1:], strict=False):
        shared = max(0, before.end - after.start)
        assert shared > 0  # long prose: every chunk repeats the end of the one before
        assert model_count(text[after.start:before.end]) <= 20


def test_no_overlap_means_disjoint_chunks():
    text = prose(random.Random(3), 10)
    chunks = split_text(text, MINILM, 50, 0)
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert before.end <= after.start
    assert_valid(text, chunks, 50)


def test_default_chunks_fit_the_model_window():
    text = prose(random.Random(11), 40)
    chunks = split_text(text, MINILM)
    assert all(c.tokens <= MODEL_LIMIT for c in chunks)
    assert_valid(text, chunks, MODEL_LIMIT)


def test_paragraphs_that_fit_are_not_cut():
    paragraphs = [f"Paragraph {i} says something short about topic {i}." for i in range(30)]
    text = "\n\n".join(paragraphs)
    chunks = split_text(text, MINILM, 40, 0)
    for chunk in chunks:  # every chunk is made of whole paragraphs
        assert chunk.text.startswith("Paragraph") and chunk.text.endswith(".")
    assert_valid(text, chunks, 40)


def test_a_long_paragraph_is_cut_at_sentence_ends():
    sentence = "The broker keeps every message until it is acknowledged by a consumer. "
    text = sentence * 40
    chunks = split_text(text, MINILM, 60, 0)
    assert all(c.text.endswith(".") for c in chunks)
    assert_valid(text, chunks, 60)


@pytest.mark.parametrize("text", [
    "",
    "   \n\n \t ",
    "One short sentence.",
    "word " * 500,  # no punctuation, no line breaks
    "line without full stop\n" * 300,  # lines only
    "a.b-c/d_e:f;g" * 400,  # one huge "word": cut between tokens
    "abcdefghijklmnopqrstuvwxyz." * 100,  # ... but never inside a run of letters
    "知识图谱检索增强生成" * 100,  # no spaces at all: every character a token
    "https://example.com/" + "x" * 3000 + " after",  # a word longer than the tokenizer reads
    "\n\n\n".join(["ab"] * 200),  # many tiny paragraphs
])
def test_edge_cases(text):
    chunks = split_text(text, MINILM, 32, 8)
    if not text.strip():
        assert chunks == []
    else:
        assert chunks
        assert_valid(text, chunks, 32)


def test_a_short_text_is_one_chunk():
    [chunk] = split_text("  Hello, world.  ", MINILM, 10, 2)
    assert (chunk.start, chunk.end, chunk.text) == (2, 15, "Hello, world.")


def test_bad_parameters_are_refused():
    for max_tokens, overlap in [(0, 0), (10, 6), (10, -1)]:
        with pytest.raises(ValueError):
            split_text("text", MINILM, max_tokens, overlap)


def test_any_counter_can_be_used():
    text = prose(random.Random(5), 8)
    counter = WordTokens()
    chunks = split_text(text, counter, 30, 5)
    assert len(chunks) > 1
    assert all(len(counter.token_starts(c.text)) <= 30 for c in chunks)


def test_document_chunks_carry_page_and_section():
    first, second = "Page one text. " * 30, "Page two text. " * 30
    text = first.strip() + "\n\n" + second.strip()
    document = Decoded(text, (Section(0, len(first.strip()), page=1, title="Intro"),
                              Section(len(first.strip()) + 2, len(text), page=2)))
    chunks = chunk_document(document, MINILM, 40, 0)
    assert chunks[0].page == 1 and chunks[0].section == "Intro"
    assert chunks[-1].page == 2 and chunks[-1].section == ""
    assert {c.page for c in chunks} == {1, 2}


def test_chunks_leave_room_in_the_model_window_for_their_title_and_headings():
    text = prose(random.Random(5), 30)
    headings = ("Installing the platform on a shared machine",
                "Building the native extensions from source")
    document = Decoded(text, (Section(0, len(text), title=" > ".join(headings),
                                      headings=headings),))
    title = "The complete operator's handbook, second edition"
    counter = MINILM
    plain = chunk_document(document, counter)
    fitted = chunk_document(document, counter, title=title, window=MODEL_LIMIT)
    assert max(c.tokens for c in plain) > MODEL_LIMIT - 20  # the prefix would not fit
    for chunk in fitted:
        embedded = embedded_text(chunk.text, list(chunk.headings), title)
        assert len(counter.token_starts(embedded)) <= MODEL_LIMIT
    # Small chunks are left as asked.
    assert chunk_document(document, counter, 40, 10, title, MODEL_LIMIT) == \
        chunk_document(document, counter, 40, 10)
