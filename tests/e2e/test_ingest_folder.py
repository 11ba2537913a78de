"""A 50-document folder loaded through the CLI (each command's ``main`` in this
process), as a user loads one, into ``tg-start`` running the whole ingestion
pipeline (librarian, decoder, the real all-MiniLM-L6-v2 embeddings, chunk and entity
embedding, LLM-free extraction, both store owners), shared with test_cli_loading.

``tg-load-text --wait`` and ``tg-load-pdf --wait`` load the folder's text, Markdown
and PDF files and return once every chunk vector is stored; their end summaries
must count the files, bytes and chunks. Then the stores must hold exactly what the
pipeline's own parts make of those 50 documents (tests/support/ingest.py works it
out here): every chunk with its text, every triple with its (document, chunk)
provenance, and a vector for every entity, each once. A folder with a PDF that has
no text shows how ``--wait`` reports a document the pipeline cannot read, and
``--wait-graph`` returns only once every chunk's graph is stored.
"""
import asyncio
import re
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.cli import tg_command
from tests.support.ingest import check_graph_stored, expected, prose, stored_provenance
from tests.support.pdf import minimal_pdf
from tests.support.stack import Stack
from trustgraph.api import AsyncTrustGraph
from trustgraph.cli.loading import size
from trustgraph.decoding import MARKDOWN, PDF, PLAIN
from trustgraph.schema import DocumentMetadata

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300)]

DEADLINE = 120.0  # for a CLI command, and for extraction to settle after it
USER, COLLECTION = "dora", "shelf"
SCOPE = {"user": USER, "collection": COLLECTION}
SCOPE_ARGS = ["-U", USER, "-C", COLLECTION]
TEXTS, MARKDOWNS, PDFS = 34, 10, 6  # 50 documents


def pdf_of(text: str) -> bytes:
    """``text`` as a PDF's text layer, 40 lines of at most ~90 characters a page."""
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + len(word) > 90:
            lines.append(line)
            line = ""
        line = f"{line} {word}".strip()
    lines.append(line)
    return minimal_pdf([lines[i:i + 40] for i in range(0, len(lines), 40)])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, list[tuple[DocumentMetadata, bytes]]]:
    """The folder (files in sub-folders too), and each document as the librarian
    stores it: id (the path in the folder), title (the file name), kind, content."""
    folder = tmp_path_factory.mktemp("fifty")
    documents = []
    for n, text in enumerate(prose(TEXTS + MARKDOWNS + PDFS)):
        if n < TEXTS:
            name, kind, content = f"notes/{n // 10}/note-{n:02}.txt", PLAIN, text.encode()
        elif n < TEXTS + MARKDOWNS:
            name, kind = f"guides/guide-{n:02}.md", MARKDOWN
            content = f"# Guide {n}\n\n{text}".encode()
        else:
            name, kind, content = f"papers/paper-{n:02}.pdf", PDF, pdf_of(text)
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content)
        documents.append((DocumentMetadata(id=name, title=Path(name).name, kind=kind,
                                           **SCOPE), content))
    return folder, documents


async def tg(stack: Stack, command: str, *args: str) -> tuple[int, str, str]:
    return await tg_command(command, "-u", stack.gateway_url, *args, timeout=DEADLINE)


def summary_pattern(files: int, total_bytes: int, chunks: int, failed: int = 0) -> str:
    return (rf"loaded {files} files \({re.escape(size(total_bytes))}\), {chunks} chunks "
            rf"stored, in [\d.]+ s \([\d.]+ chunks/s\); {failed} failed\n")


@pytest.fixture(scope="module")
def stack(ingestion_stack):
    return ingestion_stack  # shared with test_cli_loading (tests/e2e/conftest.py)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(stack):
    async with AsyncTrustGraph(stack.gateway_url) as client:
        yield client


async def test_a_folder_of_50_documents_is_stored_whole(stack, client, corpus):
    folder, documents = corpus
    want = await asyncio.to_thread(expected, documents)
    by_kind = {kind: [(d, c) for d, c in documents if (d.kind == PDF) == (kind == PDF)]
               for kind in (PLAIN, PDF)}

    for command, kind in (("tg-load-text", PLAIN), ("tg-load-pdf", PDF)):
        loaded = by_kind[kind]
        code, out, err = await tg(stack, command, str(folder), *SCOPE_ARGS, "--wait")
        assert (code, err) == (0, ""), err
        chunks = sum(want.per_document[d.id] for d, _ in loaded)
        assert re.fullmatch(summary_pattern(len(loaded), sum(len(c) for _, c in loaded),
                                            chunks), out), out

    # --wait returned, so every chunk vector is stored: no waiting here.
    [probe] = await client.embeddings(["anything"])
    found = await client.document_embeddings(probe, limit=1000, **SCOPE)
    assert len(found) == len(want.chunks) == sum(want.per_document.values())
    assert {c["chunk_id"]: c["text"] for c in found} == {
        id: chunk.text for id, chunk in want.chunks.items()}
    listed = await client.list_documents(**SCOPE)
    assert sorted(d["id"] for d in listed) == sorted(d.id for d, _ in documents)

    await check_graph_stored(client, want, stack.data_dir, USER, COLLECTION, probe,
                             DEADLINE)


async def test_wait_reports_a_document_the_pipeline_cannot_read(stack, tmp_path):
    good = "Tides rise and fall twice a day, pulled by the moon and the sun."
    (tmp_path / "good.pdf").write_bytes(pdf_of(good))
    (tmp_path / "scan.pdf").write_bytes(minimal_pdf([[]]))  # no text layer
    code, out, err = await tg(stack, "tg-load-pdf", str(tmp_path), "-C", "scans", "--wait")
    assert code == 1
    assert re.fullmatch(summary_pattern(1, (tmp_path / "good.pdf").stat().st_size, 1, 1)
                        .replace("1 files", "1 file").replace("1 chunks", "1 chunk"),
                        out), out
    assert err.startswith(f"tg-load-pdf: {tmp_path / 'scan.pdf'}: not processed: "
                          "application/pdf: the PDF has no text layer"), err


async def test_wait_graph_returns_once_every_chunk_s_graph_is_stored(stack, client, tmp_path):
    """``--wait-graph``: when the command returns, the triples store holds every
    triple of the documents with its provenance and every entity has its vector,
    with no waiting here (extraction settles after the chunk vectors, which is all
    ``--wait`` waits for)."""
    collection = "graph-wait"
    documents = []
    for n, text in enumerate(prose(6)):
        (tmp_path / f"g-{n}.txt").write_text(text)
        documents.append((DocumentMetadata(id=f"g-{n}.txt", title=f"g-{n}.txt", kind=PLAIN,
                                           user=USER, collection=collection),
                          text.encode()))
    want = await asyncio.to_thread(expected, documents)
    code, out, err = await tg(stack, "tg-load-text", str(tmp_path), "-U", USER,
                              "-C", collection, "--wait-graph")
    assert (code, err) == (0, ""), err
    assert f"{len(want.chunks)} chunks stored with their graph, in " in out, out
    assert set(stored_provenance(stack.data_dir, USER, collection)) == want.provenance
    [probe] = await client.embeddings(["anything"])
    found = await client.graph_embeddings(probe, limit=1000, user=USER, collection=collection)
    assert {e["entity"]["i"] for e in found} == want.entities
