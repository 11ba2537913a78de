"""Chunks say where they are (page range, heading path, character range, author),
the vector store keeps it as a citation, and a chunk is embedded under its headings
(chunking/context.py) while its text stays the chunk."""
from tests.support.pdf import minimal_pdf
from trustgraph.chunking import WordTokens
from trustgraph.chunking.context import embedded_text
from trustgraph.decoding import MARKDOWN, PDF, decode
from trustgraph.ingest.decoder import chunk_records
from trustgraph.schema import ChunkVector, DocumentMetadata
from trustgraph.storage.vectors.service import scored_chunk, stored_chunk
from trustgraph.storage.vectors.store import ChunkMatch

WORDS = [f"word{n}" for n in range(60)]


def pdf_chunks() -> tuple[str, list]:
    pages = [[" ".join(WORDS[:20])], [" ".join(WORDS[20:40])], [" ".join(WORDS[40:])]]
    data = minimal_pdf(pages, outline=[("Introduction", 1, []),
                                       ("Methods", 2, [("Sampling", 3, [])])],
                       author="Ada Quill")
    document = DocumentMetadata(id="paper", title="A paper")
    return decode(data, PDF).text, chunk_records(document, data, PDF, 15, 0, WordTokens())


def test_pdf_chunks_carry_page_ranges_outline_headings_and_author():
    text, chunks = pdf_chunks()
    assert len(chunks) == 4
    for chunk in chunks:
        assert text[chunk.char_start:chunk.char_end] == chunk.text
        assert chunk.author == "Ada Quill"
        assert chunk.page <= chunk.page_end
        first, last = chunk.text.split()[0], chunk.text.split()[-1]
        assert (chunk.page, chunk.page_end) == (
            WORDS.index(first) // 20 + 1, WORDS.index(last) // 20 + 1)
    assert [(c.page, c.page_end) for c in chunks] == [(1, 1), (1, 2), (2, 3), (3, 3)]
    # The heading path where each chunk starts.
    assert [c.headings for c in chunks] == [["Introduction"], ["Introduction"], ["Methods"],
                                            ["Methods", "Sampling"]]


MARKDOWN_DOC = """# Install

Get the package first.

## From source

Clone the repository and build it with make.

## With pip

Run pip install trustgraph.
"""


def test_markdown_chunks_carry_their_heading_path_and_character_range():
    data = MARKDOWN_DOC.encode()
    chunks = chunk_records(DocumentMetadata(id="guide", title="Guide"), data, MARKDOWN,
                           12, 0, WordTokens())
    text = decode(data, MARKDOWN).text
    by_start = {c.text.split("\n")[0]: c.headings for c in chunks}
    assert by_start == {"Install": ["Install"],
                        "Clone the repository and build it with make.": ["Install",
                                                                         "From source"],
                        "Run pip install trustgraph.": ["Install", "With pip"]}
    for chunk in chunks:
        assert text[chunk.char_start:chunk.char_end] == chunk.text
        assert chunk.page is None and chunk.page_end is None and chunk.author is None


def test_a_chunk_is_embedded_under_its_headings_and_title_without_repeats():
    assert embedded_text("body") == "body"
    assert embedded_text("body", ["Install", "From source"]) == "Install > From source\n\nbody"
    assert embedded_text("body", ["Guide", "Setup"], title="guide") == "guide > Setup\n\nbody"
    assert embedded_text("body", None, title="Guide") == "Guide\n\nbody"


def test_the_vector_store_keeps_a_chunks_citation_and_answers_with_it():
    _, chunks = pdf_chunks()
    chunk = chunks[-1]
    stored = stored_chunk(ChunkVector(chunk=chunk, vector=[1.0, 0.0]))
    assert (stored.text, stored.headings) == (chunk.text, "Methods > Sampling")
    assert stored.meta == {"order": chunk.index, "header_titles": ["Methods", "Sampling"],
                           "author": "Ada Quill",
                           "page_range": [chunk.page, chunk.page_end],
                           "char_range": [chunk.char_start, chunk.char_end]}
    answer = scored_chunk(ChunkMatch(chunk.id, "paper", "A paper", chunk.text, 0.5,
                                     stored.meta))
    assert (answer.order, answer.page_range, answer.header_titles, answer.author) == (
        chunk.index, [chunk.page, chunk.page_end], ["Methods", "Sampling"], "Ada Quill")
    old = scored_chunk(ChunkMatch("x/c0", "x", "", "text", 0.5))  # stored before citations
    assert (old.order, old.page_range, old.header_titles) == (None, None, None)


def test_show_sources_prints_each_citation_detail_the_source_carries():
    from trustgraph.cli.rag import source_line
    source = {"id": "paper/c3", "document_id": "paper", "title": "A paper", "text": "words",
              "distance": 0.25, "author": "Ada Quill", "page_range": [2, 3],
              "header_titles": ["Methods", "Sampling"], "order": 3,
              "scores": {"vector": 0.75, "lexical": 7.25, "fused": 0.0325}}
    assert source_line(1, source) == (
        "[1] A paper (paper) 0.250 [by Ada Quill; p. 2-3; § Methods > Sampling; chunk 3; "
        "vector 0.75 lexical 7.25 fused 0.0325]: words")
    plain = {"id": "d/c0", "document_id": "d", "title": "D", "text": "t", "distance": 0.5}
    assert source_line(2, plain) == "[2] D (d) 0.500: t"


async def test_query_api_metadata_lines_carry_the_citations_as_the_service_sent_them():
    from tests.support.answer_lines import lines_of
    from trustgraph.gateway.apis.lines import MetadataLine
    from trustgraph.schema import RagResponse, Source, encode
    source = Source(id="paper/c3", document_id="paper", title="A paper", text="words",
                    distance=0.25, author="Ada Quill", order=3, page_range=[2, 3],
                    header_titles=["Methods"], char_range=[10, 15],
                    scores={"vector": 0.75, "lexical": 7.25, "fused": 0.03})
    record = encode(RagResponse(message_type="metadata", sources=[source]))
    _, [metadata] = await lines_of(RagResponse, (record, False))
    assert metadata["sources"] == [source.model_dump(exclude_none=True)]
    MetadataLine.model_validate(metadata)  # and the OpenAPI document describes them
