"""The loading commands run as a user runs them, against ``tg-start`` running the
ingestion pipeline (librarian, decoder, the real all-MiniLM-L6-v2 embeddings, chunk
and entity embedding, LLM-free extraction, both store owners) and the gateway.

A folder of text, Markdown and a generated PDF is loaded with tg-load-text and
tg-load-pdf, then looked at with tg-show-library-documents, tg-show-graph and a
semantic search; loaded again (nothing doubles); a document is removed with
tg-remove-library-document (its chunks, vectors and triples go). tg-load-turtle and
tg-graph-to-turtle make a round trip.

Nothing waits on a timer: the test watches the flow's stage topics from before the
first load, so it knows which chunks, triples and entity vectors the pipeline made,
and polls the stores (with deadlines) until they hold exactly those.
"""
import asyncio
import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.cli import tg_command
from tests.support.pdf import minimal_pdf
from tests.support.stack import Stack
from tests.support.waiting import eventually
from trustgraph.api import AsyncTrustGraph
from trustgraph.cli.show_graph import triple_line
from trustgraph.pubsub import Bus
from trustgraph.rdf import parse_rdf
from trustgraph.schema import (
    RDFS_LABEL,
    ChunkTriples,
    ChunkVector,
    DocumentRemoved,
    EntityVectors,
    Triple,
    flow_topic,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

BIN = Path(sys.executable).parent
DEADLINE = 90.0  # for the pipeline to settle; a CLI command gets as long
SCOPE = {"user": "alice", "collection": "notes"}
SCOPE_ARGS = ["-U", "alice", "-C", "notes"]

TEXTS = {
    "alpha.txt": "Zanzibar was the centre of the East African spice trade. Merchants from "
                 "Oman shipped cloves and nutmeg from Stone Town harbour to India and "
                 "Arabia, and the clove plantations of Pemba island made the Sultan of "
                 "Zanzibar rich.",
    "beta.md": "# Vector search\n\nQdrant keeps vectors in shards. A query vector is "
               "compared by cosine similarity, and the nearest chunks are returned with "
               "their scores.\n",
    "sub/gamma.txt": "The Apollo lunar module Eagle landed in the Sea of Tranquility. Neil "
                     "Armstrong and Buzz Aldrin walked on the Moon while Michael Collins "
                     "orbited in the command module Columbia.",
}
PDF_LINES = ["Photosynthesis turns sunlight into chemical energy.",
             "Chlorophyll in the chloroplasts of green leaves absorbs red and blue light,",
             "and plants release oxygen while fixing carbon dioxide into glucose."]
DOCUMENTS = [*TEXTS, "paper.pdf"]

TURTLE = """\
@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix skos: <http://www.w3.org/2004/02/skos/core#> .

ex:ada rdfs:label "Ada Lovelace" ;
    skos:definition "mathematician who wrote the first published program" ;
    ex:worked-with ex:babbage ;
    ex:born "1815"^^<http://www.w3.org/2001/XMLSchema#gYear> .
ex:babbage rdfs:label "Charles Babbage"@en ;
    ex:designed [ rdfs:label "Analytical Engine" ; ex:kind "mechanical computer" ] .
"""


class Watch:
    """Every record on the default flow's stage topics since the stack started, per
    user and collection."""

    STAGES = {"chunk-vectors": ChunkVector, "triples": ChunkTriples,
              "entity-vectors": EntityVectors, "document-removed": DocumentRemoved}

    def __init__(self, broker_url: str) -> None:
        self.bus = Bus(broker_url)
        self.seen: dict[str, list] = {stage: [] for stage in self.STAGES}

    async def start(self) -> "Watch":
        for stage, model in self.STAGES.items():
            consumer = await self.bus.subscribe(flow_topic(stage, "default"), "e2e-watch")
            self.bus.receive(consumer, self._handler(stage, model, consumer))
        return self

    def _handler(self, stage, model, consumer):
        async def handle(message):
            self.seen[stage].append(model.model_validate_json(message.data()))
            await consumer.acknowledge(message)
        return handle

    def of(self, stage: str, user: str, collection: str) -> list:
        def document(record):
            return record.chunk.document if stage == "chunk-vectors" else record.document
        return [r for r in self.seen[stage]
                if (document(r).user, document(r).collection) == (user, collection)]

    def counts(self, user: str, collection: str) -> Counter:
        """How many records each chunk (vectors, triples) and document (entity
        vectors) has had."""
        return Counter(
            [("vectors", r.chunk.id) for r in self.of("chunk-vectors", user, collection)]
            + [("triples", r.chunk_id) for r in self.of("triples", user, collection)]
            + [("entities", r.document.id) for r in self.of("entity-vectors", user,
                                                             collection)])

    def triples(self, user: str, collection: str, documents) -> set[Triple]:
        return {t for r in self.of("triples", user, collection) if r.document.id in documents
                for t in r.triples}

    def entities(self, user: str, collection: str, documents) -> set[str]:
        return {e.entity.i for r in self.of("entity-vectors", user, collection)
                if r.document.id in documents for e in r.entities}


async def tg(stack: Stack, command: str, *args: str) -> tuple[int, str, str]:
    return await tg_command(command, "-u", stack.gateway_url, *args, timeout=DEADLINE)


@pytest.fixture(scope="module")
def stack(ingestion_stack):
    return ingestion_stack  # shared with test_ingest_folder (tests/e2e/conftest.py)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def watch(stack):
    watch = await Watch(stack.broker_url).start()
    yield watch
    await watch.bus.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(stack):
    async with AsyncTrustGraph(stack.gateway_url) as client:
        yield client


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    for name, text in TEXTS.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    (folder / "paper.pdf").write_bytes(minimal_pdf([PDF_LINES]))
    (folder / "notes.log").write_text("not a text file by its suffix")
    (folder / ".cache").mkdir()
    (folder / ".cache" / "hidden.txt").write_text("hidden folders are skipped")
    return folder


class Stores:
    """What the stores of a collection hold, read through the client."""

    def __init__(self, client: AsyncTrustGraph, user: str, collection: str) -> None:
        self.client, self.scope = client, {"user": user, "collection": collection}

    async def chunk_ids(self) -> list[str]:
        [probe] = await self.client.embeddings(["anything"])
        return [c["chunk_id"] for c in await self.client.document_embeddings(
            probe, limit=1000, **self.scope)]

    async def entity_iris(self) -> list[str]:
        [probe] = await self.client.embeddings(["anything"])
        return [e["entity"]["i"] for e in await self.client.graph_embeddings(
            probe, limit=1000, **self.scope)]

    async def triples(self) -> list[Triple]:
        return [Triple.model_validate(t)
                for t in await self.client.triples(limit=100_000, **self.scope)]

    async def settled(self, watch: Watch, documents) -> bool:
        """The stores hold exactly what the pipeline sent for ``documents``."""
        user, collection = self.scope["user"], self.scope["collection"]
        chunks = sorted(f"{id}/c0" for id in documents)
        return (sorted(await self.chunk_ids()) == chunks
                and set(await self.triples()) == watch.triples(user, collection, documents)
                and set(await self.entity_iris()) == watch.entities(user, collection,
                                                                     documents))


async def pipeline_done(watch: Watch, documents, times: int = 1) -> Counter:
    """Wait until every document's chunk (one each: the documents are short) has been
    embedded and extracted ``times`` times, and its entities embedded as often."""
    keys = [(kind, f"{id}/c0") for id in documents for kind in ("vectors", "triples")]
    keys += [("entities", id) for id in documents]

    async def done():
        counts = watch.counts(**SCOPE)
        return counts if all(counts[key] >= times for key in keys) else None
    return await eventually(done, f"the pipeline to process {', '.join(documents)} "
                                  f"({times} time(s))", timeout=DEADLINE)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def loaded(stack, watch, client, folder):
    """The folder loaded into alice/notes, and the stores settled."""
    code, out, err = await tg(stack, "tg-load-text", str(folder), *SCOPE_ARGS)
    assert (code, err) == (0, ""), err
    assert re.fullmatch(r"loaded 3 files \(\d+ B\) in [\d.]+ s \(.*/s\); 0 failed\n", out), out
    code, out, err = await tg(stack, "tg-load-pdf", str(folder), *SCOPE_ARGS)
    assert (code, err) == (0, ""), err
    assert out.startswith("loaded 1 file (")
    first = await pipeline_done(watch, DOCUMENTS)
    stores = Stores(client, **SCOPE)
    await eventually(lambda: stores.settled(watch, DOCUMENTS), "the stores to hold the corpus",
                     timeout=DEADLINE)
    return first


# --- loading and looking ------------------------------------------------------------

async def test_library_lists_the_loaded_documents(stack, loaded):
    code, out, err = await tg(stack, "tg-show-library-documents", *SCOPE_ARGS)
    assert (code, err) == (0, "")
    header, *rows = out.splitlines()
    assert header.split() == ["id", "title", "kind", "size", "stored", "(UTC)", "tags"]
    listed = {row.split()[0]: row.split() for row in rows}
    assert sorted(listed) == sorted(DOCUMENTS)
    assert listed["sub/gamma.txt"][1:3] == ["gamma.txt", "text/plain"]
    assert listed["beta.md"][2] == "text/markdown"
    assert listed["paper.pdf"][2] == "application/pdf"
    code, out, _ = await tg(stack, "tg-show-library-documents", "-U", "alice", "-C", "none")
    assert (code, out) == (0, "no documents in collection 'none' of user 'alice'\n")


async def test_search_finds_the_chunk_that_answers(loaded, client):
    for question, document, word in (
            ("Which island grew cloves for the Sultan?", "alpha.txt", "Pemba"),
            ("How do leaves capture light energy?", "paper.pdf", "Chlorophyll"),
            ("Who walked on the Moon?", "sub/gamma.txt", "Armstrong"),
            ("How are nearest neighbours scored?", "beta.md", "cosine")):
        [vector] = await client.embeddings([question])
        best = (await client.document_embeddings(vector, limit=1, **SCOPE))[0]
        assert (best["document_id"], best["chunk_id"]) == (document, f"{document}/c0")
        assert word in best["text"]


async def test_show_graph_prints_the_collections_triples(stack, watch, loaded):
    expected = watch.triples(**SCOPE, documents=DOCUMENTS)
    code, out, err = await tg(stack, "tg-show-graph", *SCOPE_ARGS)
    assert (code, err) == (0, "")
    assert sorted(out.splitlines()) == sorted(triple_line(t.model_dump()) for t in expected)

    code, out, _ = await tg(stack, "tg-show-graph", *SCOPE_ARGS, "-p", RDFS_LABEL)
    labels = [t for t in expected if t.p.i == RDFS_LABEL]
    assert sorted(out.splitlines()) == sorted(triple_line(t.model_dump()) for t in labels)
    label = labels[0]
    code, out, _ = await tg(stack, "tg-show-graph", *SCOPE_ARGS, "-o", label.o.v, "--literal")
    assert triple_line(label.model_dump()) in out.splitlines()

    code, out, err = await tg(stack, "tg-show-graph", *SCOPE_ARGS, "--limit", "3")
    assert code == 0 and len(out.splitlines()) == 3
    assert err == ("tg-show-graph: showing the first 3 triples; there may be more (raise "
                   "--limit or narrow with -s/-p/-o)\n")


async def test_loading_the_folder_again_doubles_nothing(stack, watch, client, folder,
                                                       loaded, tmp_path):
    stores = Stores(client, **SCOPE)
    chunks, triples, entities = (await stores.chunk_ids(), await stores.triples(),
                                 await stores.entity_iris())
    for command in ("tg-load-text", "tg-load-pdf"):
        code, out, err = await tg(stack, command, str(folder), *SCOPE_ARGS)
        assert (code, err) == (0, "") and out.endswith("; 0 failed\n")
    await pipeline_done(watch, DOCUMENTS, times=2)
    # A document loaded after the re-load: once the stores hold it, they have also
    # written what the re-load sent before it.
    (tmp_path / "late.txt").write_text("The Hanseatic League linked Lübeck, Hamburg and "
                                       "Bergen in a Baltic trading network.")
    assert (await tg(stack, "tg-load-text", str(tmp_path / "late.txt"), *SCOPE_ARGS))[0] == 0
    await pipeline_done(watch, ["late.txt"])
    await eventually(lambda: stores.settled(watch, [*DOCUMENTS, "late.txt"]),
                     "late.txt stored", timeout=DEADLINE)

    # One vector per chunk and per entity, and the same triples: only late.txt's added.
    now = await stores.entity_iris()
    assert sorted(await stores.chunk_ids()) == sorted([*chunks, "late.txt/c0"])
    assert len(now) == len(set(now))
    assert set(now) == set(entities) | watch.entities(**SCOPE, documents=["late.txt"])
    assert set(await stores.triples()) == set(triples) | watch.triples(
        **SCOPE, documents=["late.txt"])

    code, out, _ = await tg(stack, "tg-remove-library-document", *SCOPE_ARGS, "late.txt")
    assert (code, out) == (0, "removed late.txt\n")
    await eventually(lambda: stores.settled(watch, DOCUMENTS), "late.txt to be removed",
                     timeout=DEADLINE)


async def test_removing_a_document_removes_its_chunks_vectors_and_triples(stack, watch,
                                                                        client, loaded):
    stores = Stores(client, **SCOPE)
    code, out, err = await tg(stack, "tg-remove-library-document", *SCOPE_ARGS, "beta.md")
    assert (code, out, err) == (0, "removed beta.md\n", "")
    rest = [id for id in DOCUMENTS if id != "beta.md"]
    # What only beta.md supported goes; what other documents also said stays.
    only_beta = watch.triples(**SCOPE, documents=["beta.md"]) - watch.triples(
        **SCOPE, documents=rest)
    assert only_beta
    await eventually(lambda: stores.settled(watch, rest), "beta.md's data to leave the stores",
                     timeout=DEADLINE)
    assert not only_beta & set(await stores.triples())

    _, listing, _ = await tg(stack, "tg-show-library-documents", *SCOPE_ARGS)
    assert "beta.md" not in listing and "alpha.txt" in listing
    code, out, err = await tg(stack, "tg-remove-library-document", *SCOPE_ARGS, "beta.md")
    assert (code, out) == (1, "")
    assert err.startswith("tg-remove-library-document: not-found: no document 'beta.md'")


# --- failures while loading ------------------------------------------------------------

async def test_a_bad_file_is_reported_and_the_rest_still_load(stack, client, tmp_path):
    (tmp_path / "good.txt").write_text("Good text about rivers and bridges.")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    code, out, err = await tg(stack, "tg-load-text", str(tmp_path), str(tmp_path / "nope"),
                              "-C", "errors")
    assert code == 1
    assert out.startswith("loaded 1 file (") and out.endswith("; 2 failed\n")
    assert sorted(err.splitlines()) == [
        f"tg-load-text: {tmp_path / 'latin1.txt'}: not UTF-8 text (byte 3: invalid "
        f"continuation byte)",
        f"tg-load-text: {tmp_path / 'nope'}: no such file or folder"]
    assert [d["id"] for d in await client.list_documents(collection="errors")] == ["good.txt"]

    code, out, err = await tg(stack, "tg-load-pdf", str(tmp_path / "good.txt"), "-C", "errors")
    assert code == 1 and out.endswith("; 1 failed\n")
    assert "bad-request: the content is not a PDF (no %PDF- header)" in err


async def test_an_unreachable_gateway_is_one_line(tmp_path):
    (tmp_path / "a.txt").write_text("text")
    process = await asyncio.create_subprocess_exec(
        str(BIN / "tg-load-text"), "-u", "http://127.0.0.1:9/", str(tmp_path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(process.communicate(), DEADLINE)
    assert process.returncode == 1
    assert stderr.decode().startswith("tg-load-text: connection: cannot connect to the "
                                      "gateway at http://127.0.0.1:9/")
    assert stdout.decode().startswith("loaded 0 files (0 B)")


# --- the library without processing --------------------------------------------------------

async def test_add_show_and_remove_library_documents(stack, tmp_path):
    (tmp_path / "one.md").write_text("# One\n\ntext")
    (tmp_path / "two.txt").write_text("two")
    scope = ["-U", "bob", "-C", "lib"]
    code, out, err = await tg(stack, "tg-add-library-document", *scope, "--tags", "a, b",
                              str(tmp_path / "one.md"), str(tmp_path / "two.txt"))
    assert (code, err) == (0, "")
    assert out.splitlines() == ["added one.md (text/markdown, 11 bytes)",
                                "added two.txt (text/plain, 3 bytes)"]
    _, listing, _ = await tg(stack, "tg-show-library-documents", *scope)
    rows = [line.split() for line in listing.splitlines()[1:]]
    assert [(r[0], r[2], r[3], r[-1]) for r in rows] == [
        ("one.md", "text/markdown", "11", "a,b"), ("two.txt", "text/plain", "3", "a,b")]
    code, out, err = await tg(stack, "tg-remove-library-document", *scope, "one.md", "nope")
    assert (code, out) == (1, "removed one.md\n")
    assert err.startswith("tg-remove-library-document: not-found: no document 'nope'")
    _, listing, _ = await tg(stack, "tg-show-library-documents", *scope)
    assert [line.split()[0] for line in listing.splitlines()[1:]] == ["two.txt"]


# --- embeddings ----------------------------------------------------------------------------

async def test_invoke_embeddings_prints_vectors_or_their_size(stack):
    code, out, err = await tg(stack, "tg-invoke-embeddings", "hello world", "graphs")
    assert (code, err) == (0, "")
    vectors = [json.loads(line) for line in out.splitlines()]
    assert [len(v) for v in vectors] == [384, 384] and vectors[0] != vectors[1]
    code, out, _ = await tg(stack, "tg-invoke-embeddings", "--summary", "hello world")
    assert out == "384 dimensions, norm 1.000: hello world\n"


# --- RDF round trip --------------------------------------------------------------------------

async def test_turtle_loads_and_comes_back_out(stack, client, tmp_path):
    source = tmp_path / "people.ttl"
    source.write_text(TURTLE)
    expected = set(parse_rdf(TURTLE.encode()))
    scope = ["-C", "kg"]
    code, out, err = await tg(stack, "tg-load-turtle", str(source), *scope)
    assert (code, err) == (0, "")
    assert re.fullmatch(rf"loaded {len(expected)} triples \(3 labelled entities to embed\) "
                        rf"from 1 file in [\d.]+ s; 0 failed\n", out), out
    assert (await tg(stack, "tg-load-turtle", str(source), *scope))[0] == 0  # again: no change

    _, shown, _ = await tg(stack, "tg-show-graph", *scope)
    assert sorted(shown.splitlines()) == sorted(triple_line(t.model_dump()) for t in expected)
    written = tmp_path / "out.ttl"
    code, _, err = await tg(stack, "tg-graph-to-turtle", *scope, "-o", str(written))
    assert (code, err) == (0, "")
    assert set(parse_rdf(written.read_bytes())) == expected
    code, turtle, _ = await tg(stack, "tg-graph-to-turtle", *scope)
    assert "@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> ." in turtle
    assert set(parse_rdf(turtle.encode())) == expected

    # Labelled entities get vectors from "label: definition".
    [vector] = await client.embeddings(
        ["Ada Lovelace: mathematician who wrote the first published program"])

    async def ada():
        found = await client.graph_embeddings(vector, limit=3, collection="kg")
        return found if len(found) == 3 else None
    best, *_ = await eventually(ada, "vectors for the three labelled entities",
                                timeout=DEADLINE)
    assert best["entity"]["i"] == "http://example.org/ada" and best["label"] == "Ada Lovelace"
    assert best["score"] > 0.99

    (tmp_path / "broken.ttl").write_text("ex:a ex:b .")
    code, out, err = await tg(stack, "tg-load-turtle", str(tmp_path / "broken.ttl"), *scope)
    assert code == 1 and out.endswith("; 1 failed\n")
    assert err.startswith(f"tg-load-turtle: {tmp_path / 'broken.ttl'}: not valid turtle")


async def test_a_missing_service_is_reported(stack):
    code, out, err = await tg(stack, "tg-show-graph", "-f", "other")
    assert (code, out) == (1, "")
    assert err.startswith("tg-show-graph: unknown-flow: unknown flow 'other'")

