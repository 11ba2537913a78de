"""Killing the pipeline mid-ingest loses nothing and doubles nothing.

``tg-start`` runs the whole ingestion pipeline (librarian, decoder, the real
all-MiniLM-L6-v2 embeddings, chunk and entity embedding, LLM-free extraction, both
store owners). While a corpus flows through it, the stage processors are SIGKILLed
in three waves, each at a point the test sees on the stage topics, and tg-start
restarts them:

1. the decoder, as soon as the first chunks appear (the rest of the corpus is
   loaded while it is down, so its restart finds a backlog); then, once that backlog
   is decoded and chunk-embeddings has its requests in at the embeddings service,
   the broker is restarted (SIGTERM): answers in flight are lost, and ingestion must
   go on within the requesters' liveness (10 s), not after TG_REQUEST_TIMEOUT
   (120 s), which is how this test used to fail when pulsar-lite's fault below
   restarted the broker at that moment;
2. chunk-embeddings and extract, a quarter of the way through the chunk vectors;
3. the vector store's owner, the triples store's owner and entity-embeddings,
   past half way.

Each kill must land while work remains (asserted), so unacknowledged records are
redelivered to the restarted processes. (A kill sometimes leaves pulsar-lite 0.2.0
holding the dead process's consumer; tg-start then restarts the broker, and that
must lose nothing either: docs/ingestion.md.) Afterwards the stores must hold exactly
what the pipeline's own parts make of the corpus (tests/support/ingest.py): every
chunk vector once with its text, every (triple, document, chunk) provenance row
once, a vector for every entity, and load-status "done" with every chunk counted.
"""
import asyncio
import signal

import pytest
import pytest_asyncio

from tests.support.ingest import Expected, StageWatch, check_graph_stored, expected, prose
from tests.support.stack import Stack
from tests.support.waiting import eventually
from trustgraph.api import AsyncTrustGraph
from trustgraph.decoding import PLAIN
from trustgraph.schema import DocumentMetadata

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300)]

PROCESSORS = ["config", "librarian", "decoder", "embeddings", "chunk-embeddings", "extract",
              "entity-embeddings", "triples-store", "vector-store", "gateway"]
DEADLINE = 120.0
USER, COLLECTION = "erin", "survivors"
SCOPE = {"user": USER, "collection": COLLECTION}
DOCUMENTS = 30
# Progress after the broker restart must come well before TG_REQUEST_TIMEOUT (120 s),
# which is what a request whose answer was lost used to wait.
AFTER_BROKER_RESTART = 60.0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack():
    # A few chunks per embeddings request (64 by default): chunk vectors then arrive
    # in small steps, so each wave lands at its point rather than after a burst
    # that finished everything.
    async with Stack(processors=PROCESSORS, startup_timeout=120,
                     env={"TG_EMBEDDINGS_REQUEST_TEXTS": "4"}) as stack:
        yield stack


def kill(stack: Stack, *names: str) -> dict[str, int]:
    """SIGKILL each; returns their pids, for ``restarted``."""
    return {name: stack.kill(name) for name in names}


async def restarted(stack: Stack, killed: dict[str, int]) -> None:
    """Wait until tg-start has replaced every one and it serves again."""
    for name, pid in killed.items():
        await asyncio.to_thread(stack.wait_restarted, name, pid, 60.0)


async def test_killing_stage_processors_mid_ingest_loses_and_doubles_nothing(stack):
    texts = prose(DOCUMENTS, sizes=(2600, 3400, 1800))
    documents = [(DocumentMetadata(id=f"doc-{n:02}.txt", title=f"doc-{n:02}.txt", kind=PLAIN,
                                   **SCOPE), text.encode()) for n, text in enumerate(texts)]
    want = await asyncio.to_thread(expected, documents)
    chunks = len(want.chunks)
    watch = await StageWatch(stack.broker_url).start()
    async with AsyncTrustGraph(stack.gateway_url) as client:
        async def load(part):
            await asyncio.gather(*(client.load_text(content.decode(), d.id, title=d.title,
                                                    **SCOPE) for d, content in part))

        def vectors_past(fraction: float) -> bool:
            return watch.count("chunk-vectors") >= fraction * chunks

        def mid_ingest() -> None:
            seen = {id for r in watch.seen["chunk-vectors"] for id in [r.chunk.id]}
            assert len(seen) < chunks, "the pipeline finished before the kill"

        half = DOCUMENTS // 2
        await load(documents[:half])
        await eventually(lambda: watch.count("chunks") > 0, "the first chunks",
                         timeout=DEADLINE)
        mid_ingest()
        decoder = kill(stack, "decoder")
        await asyncio.gather(load(documents[half:]), restarted(stack, decoder))

        await eventually(lambda: watch.count("chunks") >= chunks // 2, "the backlog decoded",
                         timeout=DEADLINE, every=0.005)
        mid_ingest()
        stored = watch.count("chunk-vectors")
        await restarted(stack, {"broker": stack.kill("broker", signal.SIGTERM)})
        await eventually(lambda: watch.count("chunk-vectors") >= min(chunks, stored + 8),
                         "chunk vectors again after the broker restart",
                         timeout=AFTER_BROKER_RESTART)

        await eventually(lambda: vectors_past(0.25), "a quarter of the chunk vectors",
                         timeout=DEADLINE)
        mid_ingest()
        second = kill(stack, "chunk-embeddings", "extract")
        # Chunk vectors flow again once chunk-embeddings is back; extract may take
        # longer to start, and the next wave need not wait for it.
        await restarted(stack, {"chunk-embeddings": second.pop("chunk-embeddings")})

        await eventually(lambda: vectors_past(0.55), "over half of the chunk vectors",
                         timeout=DEADLINE)
        mid_ingest()
        third = kill(stack, "vector-store", "triples-store", "entity-embeddings")
        await restarted(stack, second | third)
        await check_exactly_once(stack, client, [d.id for d, _ in documents], want)
    await watch.close()


async def check_exactly_once(stack: Stack, client: AsyncTrustGraph, ids: list[str],
                             want: Expected) -> None:
    """Nothing lost, nothing doubled: every document done, each chunk's vector stored
    once and nothing else in the collection, every (triple, document, chunk) row once."""
    async def all_done():
        statuses = await client.load_status(ids, **SCOPE)
        return statuses if all(s["state"] == "done" for s in statuses) else None
    statuses = await eventually(all_done, "every document to be done", timeout=DEADLINE)
    assert {s["id"]: s["stored"] for s in statuses} == dict(want.per_document)

    [probe] = await client.embeddings(["anything"])
    found = await client.document_embeddings(probe, limit=1000, **SCOPE)
    assert len(found) == len(want.chunks)
    assert {c["chunk_id"]: c["text"] for c in found} == {
        id: chunk.text for id, chunk in want.chunks.items()}

    await check_graph_stored(client, want, stack.data_dir, USER, COLLECTION, probe,
                             DEADLINE)


async def test_the_lexical_index_holds_every_chunk_exactly_once_after_the_kills(stack):
    """Runs after the test above, on what it left: the vector store's owner was killed
    mid-ingest, and its lexical index beside the vectors has each chunk once, with
    its text, and nothing else."""
    import sqlite3

    from trustgraph.storage.vectors.lexical import LEXICAL
    from trustgraph.storage.vectors.spaces import Space
    texts = prose(DOCUMENTS, sizes=(2600, 3400, 1800))
    documents = [(DocumentMetadata(id=f"doc-{n:02}.txt", title=f"doc-{n:02}.txt", kind=PLAIN,
                                   **SCOPE), text.encode()) for n, text in enumerate(texts)]
    want = await asyncio.to_thread(expected, documents)
    table = Space(LEXICAL, USER, COLLECTION).name.replace("-", "_")
    path = stack.data_dir / "lexical.sqlite"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute(f"SELECT chunk_id, body FROM {table}").fetchall()
        indexed = db.execute("SELECT count(*) FROM chunks WHERE space = ?",
                             (table,)).fetchone()[0]
    assert len(rows) == len({chunk for chunk, _ in rows}) == indexed == len(want.chunks)
    assert dict(rows) == {id: chunk.text for id, chunk in want.chunks.items()}
