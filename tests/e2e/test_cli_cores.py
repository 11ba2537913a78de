"""``tg-export-core`` and ``tg-import-core`` against tg-start's ingestion stack (shared,
tests/e2e/conftest.py): documents loaded through the real pipeline (the real
embedding model, LLM-free extraction) are exported to a file and imported into
another collection, which then answers the same questions with the same sources;
a second import changes nothing; what is not a core is refused saying so."""
import asyncio
import json

import pytest
import pytest_asyncio

from tests.support.cli import tg_command
from tests.support.ingest import check_graph_stored, expected, prose
from tests.support.stack import Stack
from tests.support.waiting import eventually
from trustgraph.api import AsyncTrustGraph
from trustgraph.decoding import PLAIN
from trustgraph.schema import DocumentMetadata

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300)]

USER = "kim"
SOURCE, MOVED = "core-source", "core-moved"
DEADLINE = 120.0
QUESTIONS = ("How do generators work?", "What does the with statement do?",
             "How are exceptions raised?")


@pytest.fixture(scope="module")
def stack(ingestion_stack):
    return ingestion_stack


async def tg(stack: Stack, command: str, *args: str) -> tuple[int, str, str]:
    return await tg_command(command, "-u", stack.gateway_url, "-U", USER, *args,
                            timeout=DEADLINE)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def loaded(stack):
    """The documents, once the stores hold all the pipeline makes of them."""
    texts = prose(6, sizes=(1800, 2500))
    documents = [(DocumentMetadata(id=f"ref-{n}.txt", title=f"ref-{n}.txt", kind=PLAIN,
                                   user=USER, collection=SOURCE), text.encode())
                 for n, text in enumerate(texts)]
    want = await asyncio.to_thread(expected, documents)
    async with AsyncTrustGraph(stack.gateway_url) as client:
        for document, content in documents:
            await client.load_text(content.decode(), document.id, title=document.title,
                                   user=USER, collection=SOURCE)

        async def done() -> bool:
            statuses = await client.load_status([d.id for d, _ in documents], user=USER,
                                                collection=SOURCE)
            return all(s["state"] == "done" for s in statuses)
        await eventually(done, "the documents to be stored", timeout=DEADLINE)
        [probe] = await client.embeddings(["anything"])
        await check_graph_stored(client, want, stack.data_dir, USER, SOURCE, probe, DEADLINE)
    return want


async def answers(client: AsyncTrustGraph, collection: str) -> dict:
    scope = {"user": USER, "collection": collection}
    found = {}
    for question in QUESTIONS:
        [vector] = await client.embeddings([question])
        found[question] = [(c["chunk_id"], c.get("document_id"), c["text"],
                            round(c["score"], 5))
                           for c in await client.document_embeddings(vector, limit=5, **scope)]
        found[f"entities: {question}"] = [
            (e["entity"]["i"], round(e["score"], 5))
            for e in await client.graph_embeddings(vector, limit=5, **scope)]
    found["triples"] = sorted(json.dumps(t, sort_keys=True)
                              for t in await client.triples(limit=100_000, **scope))
    found["documents"] = sorted((d["id"], d["title"], d["sha256"])
                                for d in await client.list_documents(**scope))
    return found


async def test_a_collection_exported_and_imported_answers_the_same(stack, loaded, tmp_path):
    core = tmp_path / "source.tgz"
    status, _, exported = await tg(stack, "tg-export-core", "-C", SOURCE, "-o", str(core))
    assert status == 0, exported
    assert f"{USER}/{SOURCE} -> {core}" in exported
    assert f"6 documents, {len(loaded.chunks)} chunks" in exported
    assert core.exists() and not (tmp_path / "source.tgz.partial").exists()

    status, _, imported = await tg(stack, "tg-import-core", str(core), "-C", MOVED)
    assert status == 0, imported
    assert f"({USER}/{SOURCE}) -> {USER}/{MOVED}" in imported
    # What was stored is what was exported, part by part.
    assert imported.rsplit(" s: ", 1)[1] == exported.rsplit(" s: ", 1)[1]
    async with AsyncTrustGraph(stack.gateway_url) as client:
        source, moved = await answers(client, SOURCE), await answers(client, MOVED)
        assert moved == source and all(source.values())

        status, _, again = await tg(stack, "tg-import-core", str(core), "-C", MOVED)
        assert status == 0, again
        assert await answers(client, MOVED) == source  # nothing doubled

    status, _, moved_out = await tg(stack, "tg-export-core", "-C", MOVED, "-o",
                                    str(tmp_path / "moved.tgz"))
    assert status == 0, moved_out
    assert moved_out.rsplit(" s: ", 1)[1] == exported.rsplit(" s: ", 1)[1]


async def test_a_file_that_is_not_a_core_is_refused_and_nothing_is_written(stack, tmp_path):
    junk = tmp_path / "junk.tgz"
    junk.write_bytes(b"\x1f\x8b\x08\x00not really gzip")
    status, _, err = await tg(stack, "tg-import-core", str(junk), "-C", "junk")
    assert status == 1
    assert "tg-import-core: bad-request: not a knowledge core" in err
