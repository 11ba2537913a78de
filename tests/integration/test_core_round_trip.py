"""Knowledge cores move a collection between deployments and lose nothing.

Three deployments, each a broker of its own with the real librarian, triples-store
and vector-store processors and a gateway: A embedded (SQLite triples, Qdrant Edge
with its FTS5 lexical index), B distributed (the Neo4j backend against the ArcadeDB
Bolt server the contract suite uses; the Qdrant server backend against
qdrant-client's local mode, with its sparse lexical index), C embedded again. A
collection filled in A goes A → B → C as knowledge cores, over the gateways' HTTP
routes (``AsyncTrustGraph.export_core`` / ``import_core``), a few records per page
so every part takes several pages and several members. Then:

* the same questions get the same answers in A, B and C: nearest chunks and
  entities (order and scores), triples, a GraphRAG subgraph with its provenance,
  the documents' metadata; and in C, back on the embedded backends, the lexical
  search too (B's sparse BM25 scores differently by design);
* the core C gives back holds exactly A's rows: every document, chunk (with its
  citation fields and its vector), entity and (triple, document, chunk); a vector
  that went through Qdrant's other engine may come back one float32 unit apart
  (each engine normalises cosine vectors itself), one that stayed on Edge is bit
  for bit the same;
* an import cut off midway, run again, stores the same collection, nothing twice;
* the core carries the collection's embedding model (its stamp, stamps.py), and an
  import stamps an unstamped collection with it; a core of another model than a
  collection's is refused before anything is stored;
* a file that is not a core, or a cut one, is refused and says why.
"""
import asyncio
import json
import random
from array import array
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest
import pytest_asyncio
from qdrant_client import AsyncQdrantClient

from trustgraph.api import AsyncTrustGraph, TrustGraphError
from trustgraph.base import Processor, ProcessorSettings, ProcessorSpec
from trustgraph.gateway.apis import cores
from trustgraph.gateway.app import Gateway, GatewaySettings
from trustgraph.librarian.service import SPEC as LIBRARIAN_SPEC
from trustgraph.librarian.service import LibrarianSettings
from trustgraph.librarian.store import LibraryStore
from trustgraph.pubsub.embedded import EmbeddedBroker, free_port
from trustgraph.schema import DocumentMetadata, Term, Triple
from trustgraph.schema.core_archive import CoreReader, parse_member_name
from trustgraph.storage.triples.neo4j import Neo4jTriplesStore
from trustgraph.storage.triples.service import parts as triples_parts
from trustgraph.storage.triples.sqlite import SqliteTriplesStore
from trustgraph.storage.vectors.lexical import Fts5Index
from trustgraph.storage.vectors.qdrant_edge import EdgeBackend
from trustgraph.storage.vectors.qdrant_server import QdrantServerBackend
from trustgraph.storage.vectors.qdrant_sparse import QdrantSparseIndex
from trustgraph.storage.vectors.service import parts as vector_parts
from trustgraph.storage.vectors.store import ChunkVector, EntityVector, VectorStore

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300),
              pytest.mark.filterwarnings("ignore:Payload indexes have no effect")]

DIM = 16
MODEL = "test-embedder-16"  # what A's collection is stamped with, as the pipeline stamps
USER, COLLECTION = "ada", "moved"
SCOPE = {"user": USER, "collection": COLLECTION}
WORDS = ("engine analytical difference loom punched card bernoulli numbers note "
         "calculation machine lovelace babbage poetry science operation symbols").split()
I, L = Term.iri, Term.literal  # noqa: E741 (the wire's term kinds "i", "l")
E = "http://example.org/"


def unit(seed: object) -> list[float]:
    rng = random.Random(str(seed))
    vector = [rng.gauss(0, 1) for _ in range(DIM)]
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector]


# --- deployments ----------------------------------------------------------------------

FLOWS = ["default"]  # pinned: no config service here to wait for (TG_CONFIG_WAIT each)


@asynccontextmanager
async def deployment(root: Path, vectors: VectorStore, triples):
    """A broker of its own with the three store owners and a gateway; its URL."""
    root.mkdir(parents=True, exist_ok=True)
    broker = EmbeddedBroker(root, free_port())
    broker.start()
    async with AsyncExitStack() as stack:
        stack.callback(broker.stop)
        url = broker.url
        for processor in (
                Processor(LIBRARIAN_SPEC, LibrarianSettings(pulsar_url=url, tg_flows=FLOWS,
                                                            tg_data_dir=str(root))),
                Processor(ProcessorSpec("triples-store", ProcessorSettings,
                                        lambda runtime: triples_parts(triples)),
                          ProcessorSettings(pulsar_url=url, tg_flows=FLOWS)),
                Processor(ProcessorSpec("vector-store", ProcessorSettings,
                                        lambda runtime: vector_parts(vectors)),
                          ProcessorSettings(pulsar_url=url, tg_flows=FLOWS))):
            await processor.start()
            stack.push_async_callback(processor.stop)
        gateway = Gateway(GatewaySettings(pulsar_url=url, tg_gateway_host="127.0.0.1",
                                          tg_gateway_port=free_port(),
                                          tg_gateway_keys=False, tg_flows=FLOWS))
        stack.push_async_callback(gateway.stop)
        yield await gateway.start()


def embedded(root: Path):
    return (VectorStore(EdgeBackend(root / "vectors"), Fts5Index(root / "lexical.sqlite")),
            SqliteTriplesStore.open(root / "triples.sqlite"))


@pytest.fixture(scope="module")
def small_pages():
    """A few records per page, so every part takes several pages (and members)."""
    saved = dict(cores.PAGE_RECORDS)
    cores.PAGE_RECORDS.update(documents=2, chunks=7, entities=6, triples=13)
    yield
    cores.PAGE_RECORDS.update(saved)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def deployments(tmp_path_factory, arcadedb, small_pages):
    root = tmp_path_factory.mktemp("cores")
    a_vectors, a_triples = embedded(root / "a")
    c_vectors, c_triples = embedded(root / "c")
    qdrant = QdrantServerBackend(AsyncQdrantClient(location=":memory:"))
    b_vectors = VectorStore(qdrant, QdrantSparseIndex(qdrant.client))
    b_triples = Neo4jTriplesStore.open(arcadedb.uri, arcadedb.user, arcadedb.password,
                                       arcadedb.database)
    a_triples, b_triples, c_triples = await asyncio.gather(a_triples, b_triples, c_triples)
    await b_triples.delete_collection(USER, COLLECTION)  # the server outlives modules
    await fill(root / "a", a_vectors, a_triples)
    async with deployment(root / "a", a_vectors, a_triples) as a, \
            deployment(root / "b", b_vectors, b_triples) as b, \
            deployment(root / "c", c_vectors, c_triples) as c:
        yield {"a": a, "b": b, "c": c, "root": root, "b_vectors": b_vectors,
               "c_vectors": c_vectors}


async def fill(root: Path, vectors: VectorStore, triples) -> None:
    """A's collection: documents, chunks with citation fields, entities, triples."""
    library = LibraryStore(root)
    for d in range(4):
        library.put(DocumentMetadata(id=f"note-{d}.md", title=f"Note {d} “G”", kind="text/markdown",
                                     tags=["lovelace", f"n{d}"], **SCOPE),
                    f"# Note {d}\n\nThe analytical engine, part {d}.".encode())
    await vectors.upsert_chunks(USER, COLLECTION, [ChunkVector(
        chunk_id=f"note-{n % 4}.md/c{n}", document=f"note-{n % 4}.md", vector=unit(n),
        text=" ".join(random.Random(n).choices(WORDS, k=30)) + f' "quoted" line\n{n}',
        title=f"Note {n % 4} “G”", version=1, index=n // 4,
        headings=f"Note {n % 4} > Part {n}",
        meta={"order": n // 4, "header_titles": [f"Note {n % 4}", f"Part {n}"],
              "char_range": [n * 100, n * 100 + 99], "page_range": [1, 2]})
        for n in range(40)], MODEL)
    await vectors.put_entities(USER, COLLECTION, [
        (EntityVector(entity=I(f"{E}e{n}"), vector=unit(f"e{n}"), label=f"entity {n}"),
         [f"note-{n % 4}.md", f"note-{(n + 1) % 4}.md"][:1 + n % 2]) for n in range(25)],
        MODEL)
    for n in range(40):
        found = [Triple(s=I(f"{E}e{n % 25}"), p=I(f"{E}relates"), o=I(f"{E}e{(n * 7) % 25}")),
                 Triple(s=I(f"{E}e{n % 25}"), p=I("http://www.w3.org/2000/01/rdf-schema#label"),
                        o=L(f"entity {n % 25}")),
                 Triple(s=I(f"{E}e{n % 25}"), p=I(f"{E}says"),
                        o=L(f'"line {n}"\nwith ünïcode and \\ backslash'))]
        await triples.add(USER, COLLECTION, found, document=f"note-{n % 4}.md",
                          chunk=f"note-{n % 4}.md/c{n}")


# --- what a deployment answers ----------------------------------------------------------

async def answers(url: str, lexical: bool = True) -> dict:
    async with AsyncTrustGraph(url) as client:
        found = {}
        for n in range(5):
            chunks = await client.document_embeddings(unit(f"q{n}"), limit=8, **SCOPE)
            found[f"chunks {n}"] = [(c["chunk_id"], c["text"], c.get("document_id"),
                                     c.get("title"), c.get("char_range"),
                                     c.get("header_titles"), round(c["score"], 5))
                                    for c in chunks]
            entities = await client.graph_embeddings(unit(f"q{n}"), limit=6, **SCOPE)
            found[f"entities {n}"] = [(e["entity"]["i"], e.get("label"),
                                       round(e["score"], 5)) for e in entities]
        found["triples"] = sorted(json.dumps(t, sort_keys=True)
                                  for t in await client.triples(limit=10000, **SCOPE))
        subgraph = await final(client, "subgraph", {
            "seeds": [{"t": "i", "i": f"{E}e1"}, {"t": "i", "i": f"{E}e2"}],
            "seed_chunks": ["note-1.md/c1"], "max_entities": 100, "triple_limit": 100,
            "max_subgraph_size": 1000, "max_path_length": 2, **SCOPE})
        found["subgraph"] = (sorted(json.dumps(e, sort_keys=True)
                                    for e in subgraph["triples"]),
                             subgraph.get("labels"))
        documents = await client.list_documents(**SCOPE)
        found["documents"] = sorted(json.dumps(d, sort_keys=True) for d in documents)
        if lexical:
            for query in ("analytical engine", "bernoulli numbers", "poetry"):
                hits = await final(client, "lexical-search", {"query": query, "limit": 5,
                                                              **SCOPE})
                found[f"lexical {query}"] = [(c["chunk_id"], round(c["score"], 4))
                                             for c in hits["chunks"]]
        return found


async def final(client: AsyncTrustGraph, service: str, request: dict) -> dict:
    last = {}
    async for last in client.request(service, request):  # noqa: B007
        pass
    return last


async def export(url: str, collection: str = COLLECTION) -> bytes:
    async with AsyncTrustGraph(url) as client:
        return b"".join([data async for data in client.export_core(collection, USER)])


async def put(url: str, core: bytes, collection: str = COLLECTION) -> dict:
    async def pieces():
        for start in range(0, len(core), 4096):
            yield core[start:start + 4096]
    async with AsyncTrustGraph(url) as client:
        return await client.import_core(pieces(), collection, USER)


def rows(core: bytes) -> dict[str, dict[str, tuple[float, ...]]]:
    """Every row of a core by part (its JSON line), with its vector: order-free."""
    reader, pages, found = CoreReader(), {}, {}
    members = reader.feed(core)
    reader.end()
    for name, data in members:
        if page := parse_member_name(name):
            pages[page] = data
    for (part, number, vectors), data in pages.items():
        if vectors:
            continue
        lines = data.decode().splitlines()
        vectors = array("f", pages.get((part, number, True), b""))
        size = len(vectors) // len(lines)
        found.setdefault(part, {}).update(
            (line, tuple(vectors[n * size:(n + 1) * size])) for n, line in enumerate(lines))
    return {part: found.get(part, {}) for part in ("documents", "chunks", "entities",
                                                   "triples")}


def assert_same_rows(found: dict, wanted: dict) -> None:
    """The same rows; the same vectors but for float32 rounding. Qdrant normalises a
    cosine vector as it stores it, in each engine's own arithmetic: a vector that went
    through another engine can come back one unit in its last place apart (6e-8)."""
    assert {part: set(lines) for part, lines in found.items()} == \
        {part: set(lines) for part, lines in wanted.items()}
    for part, lines in wanted.items():
        for line, vector in lines.items():
            assert found[part][line] == pytest.approx(vector, abs=1e-7), line


# --- the tests ---------------------------------------------------------------------------

async def test_a_collection_goes_to_neo4j_and_qdrant_and_back_with_the_same_answers(
        deployments):
    a, b, c = deployments["a"], deployments["b"], deployments["c"]
    core_a = await export(a)
    answer = await put(b, core_a)
    assert answer["stored"] == {"documents": 4, "chunks": 40, "entities": 25, "triples": 120}
    assert answer["into"] == SCOPE
    core_b = await export(b)
    await put(c, core_b)
    core_c = await export(c)

    in_a = await answers(a)
    in_b, in_c = await answers(b, lexical=False), await answers(c)
    assert in_b == {key: value for key, value in in_a.items()
                    if not key.startswith("lexical")}
    assert in_c == in_a
    assert all(in_a[key] for key in in_a)  # every question found something

    assert_same_rows(rows(core_b), rows(core_a))
    assert_same_rows(rows(core_c), rows(core_a))
    assert {part: len(found) for part, found in rows(core_a).items()} == {
        "documents": 4, "chunks": 40, "entities": 25, "triples": 120}
    manifest = json.loads(dict(CoreReader().feed(core_a))["manifest.json"])
    assert (manifest["format"], manifest["version"], manifest["dimension"]) == (
        "trustgraph-core", 1, DIM)
    assert manifest["source"] == SCOPE and manifest["embedding_model"] == MODEL
    for imported in (deployments["b_vectors"], deployments["c_vectors"]):
        assert await imported.model_of(USER, COLLECTION) == MODEL


async def test_an_import_cut_off_midway_and_run_again_stores_everything_once(deployments):
    a, c = deployments["a"], deployments["c"]
    core = await export(a)
    with pytest.raises(TrustGraphError, match="ends early"):
        await put(c, core[:len(core) * 2 // 3], collection="resumed")
    partly = rows(await export(c, "resumed"))
    assert 0 < sum(map(len, partly.values())) < sum(map(len, rows(core).values()))
    await put(c, core, collection="resumed")
    await put(c, core, collection="resumed")  # and once more, for good measure
    assert rows(await export(c, "resumed")) == rows(core)  # one engine: bit for bit
    async with AsyncTrustGraph(c) as client:  # nothing doubled where rows cannot show it
        scope = {"user": USER, "collection": "resumed"}
        assert len(await client.document_embeddings(unit(0), limit=1000, **scope)) == 40
        assert len(await client.graph_embeddings(unit(0), limit=1000, **scope)) == 25


async def test_a_core_of_another_embedding_model_is_refused_before_anything_is_stored(
        deployments):
    a, c = deployments["a"], deployments["c"]
    core = await export(a)
    # C's collection already holds vectors of another model (its stamp says which).
    await deployments["c_vectors"].upsert_chunks(USER, "other-model", [ChunkVector(
        chunk_id="x.md/c0", document="x.md", vector=unit("x"), text="already here")],
        "text-embedding-3-large")
    with pytest.raises(TrustGraphError, match=f"{MODEL}.*text-embedding-3-large") as refused:
        await put(c, core, collection="other-model")
    assert refused.value.type == "embedding-model-mismatch"
    found = rows(await export(c, "other-model"))
    assert [len(found[part]) for part in found] == [0, 1, 0, 0]  # what it held before
    assert await deployments["c_vectors"].model_of(USER, "other-model") == \
        "text-embedding-3-large"


@pytest.mark.parametrize("body, why", [
    (b"not a core at all", "not a gzip-compressed core"),
    (b"\x1f\x8b\x08\x00" + b"\0" * 30, "not a gzip-compressed core"),
])
async def test_what_is_not_a_core_is_refused_saying_why(deployments, body, why):
    with pytest.raises(TrustGraphError, match=why) as refused:
        await put(deployments["c"], body, collection="junk")
    assert refused.value.type == "bad-request"
