"""One contract, every vector backend: Qdrant Edge (embedded), the Qdrant server
backend against qdrant-client's local mode, and against a real server when
QDRANT_URL (+ QDRANT_API_KEY) is set. Edge's index-aside machinery is tested last."""
import asyncio
import logging
import math
import os
import random
import shutil
import tempfile
from pathlib import Path

import pytest
from qdrant_client import AsyncQdrantClient

from trustgraph.schema import Term
from trustgraph.storage.vectors import edge_shards
from trustgraph.storage.vectors.lexical import Fts5Index
from trustgraph.storage.vectors.qdrant_edge import EdgeBackend
from trustgraph.storage.vectors.qdrant_server import QdrantServerBackend
from trustgraph.storage.vectors.qdrant_sparse import QdrantSparseIndex
from trustgraph.storage.vectors.reembed import reembed
from trustgraph.storage.vectors.stamps import ModelMismatch
from trustgraph.storage.vectors.store import ChunkVector, EntityVector, Point, Space, VectorStore

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect")

DIM = 8
I, L = Term.iri, Term.literal


def vec(seed: int | str) -> list[float]:
    rng = random.Random(str(seed))
    return [rng.uniform(-1, 1) for _ in range(DIM)]


@pytest.fixture
def shard_dir(tmp_path):
    """Edge's shard directories, in memory when the machine has a tmpfs: creating and
    closing a shard fsyncs (~0.2 s on this disk), which tells nothing about the
    contract and would make the suite ten times slower."""
    if not os.path.isdir("/dev/shm"):
        yield tmp_path
        return
    path = Path(tempfile.mkdtemp(prefix="tg-edge-", dir="/dev/shm"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["qdrant-edge", "qdrant-local", "qdrant-server"])
async def store(request):
    """Each backend with its lexical index: FTS5 beside Edge, sparse vectors in Qdrant."""
    if request.param == "qdrant-edge":
        shards = request.getfixturevalue("shard_dir")
        backend, lexical = EdgeBackend(shards), Fts5Index(shards / "lexical.sqlite")
    elif request.param == "qdrant-local":
        backend = QdrantServerBackend(AsyncQdrantClient(location=":memory:"))
        lexical = QdrantSparseIndex(backend.client)
    elif os.environ.get("QDRANT_URL"):
        backend = QdrantServerBackend.connect(os.environ["QDRANT_URL"],
                                              os.environ.get("QDRANT_API_KEY"))
        lexical = QdrantSparseIndex(backend.client)
    else:
        pytest.skip("set QDRANT_URL to run against a Qdrant server")
    store = VectorStore(backend, lexical)
    yield store
    await store.close()


@pytest.fixture
def scope(request):
    """A (user, collection) of this test's own (a real server outlives tests)."""
    return f"user-{random.getrandbits(40):x}", "default"


def chunk(n: int, document: str = "doc", **changes) -> ChunkVector:
    values = dict(chunk_id=f"{document}#c{n}", document=document, vector=vec(f"c{n}"),
                  text=f"text {n}", title=f"title of {document}")
    return ChunkVector(**{**values, **changes})


async def test_chunk_search_returns_the_nearest_chunks_with_payload_and_score(store, scope):
    chunks = [chunk(n) for n in range(6)]
    await store.upsert_chunks(*scope, chunks)
    found = await store.search_chunks(*scope, chunks[2].vector, limit=3)
    assert len(found) == 3
    best = found[0]
    assert (best.chunk_id, best.document, best.title, best.text) == \
        ("doc#c2", "doc", "title of doc", "text 2")
    assert math.isclose(best.score, 1.0, abs_tol=1e-4)
    assert [m.score for m in found] == sorted((m.score for m in found), reverse=True)
    assert len(await store.search_chunks(*scope, chunks[0].vector, limit=10)) == 6


async def test_entity_search_returns_terms_and_labels(store, scope):
    entities = [EntityVector(I("urn:alice"), vec("alice"), "Alice", "doc"),
                EntityVector(L("forty two"), vec("42"), "42", "doc")]
    await store.upsert_entities(*scope, entities)
    found = await store.search_entities(*scope, vec("42"), limit=1)
    assert [(m.entity, m.label) for m in found] == [(L("forty two"), "42")]
    assert math.isclose(found[0].score, 1.0, abs_tol=1e-4)
    assert {m.entity for m in await store.search_entities(*scope, vec(1), 5)} == \
        {I("urn:alice"), L("forty two")}


async def test_upserts_are_idempotent_by_id_and_replace(store, scope):
    await store.upsert_chunks(*scope, [chunk(n) for n in range(3)])
    await store.upsert_chunks(*scope, [chunk(n) for n in range(3)])
    await store.upsert_chunks(*scope, [chunk(1, text="new text", vector=vec("moved"))])
    entity = EntityVector(I("urn:e"), vec("e"), "E", "doc")
    await store.upsert_entities(*scope, [entity, entity])
    await store.upsert_entities(*scope, [entity])
    assert await store.count(*scope) == {"chunks": 3, "entities": 1}
    [best] = await store.search_chunks(*scope, vec("moved"), limit=1)
    assert (best.chunk_id, best.text) == ("doc#c1", "new text")


async def test_removing_a_document_keeps_what_other_documents_support(store, scope):
    shared = I("urn:shared")
    await store.upsert_chunks(*scope, [chunk(n, "first") for n in range(3)])
    await store.upsert_chunks(*scope, [chunk(n, "second") for n in range(2)])
    await store.upsert_entities(*scope, [EntityVector(shared, vec("s"), "S", "first"),
                                         EntityVector(I("urn:first"), vec("f"), "F", "first")])
    await store.upsert_entities(*scope, [EntityVector(shared, vec("s"), "S", "second")])
    await store.remove_document(*scope, "first")
    assert await store.count(*scope) == {"chunks": 2, "entities": 1}
    assert {m.document for m in await store.search_chunks(*scope, vec("c0"), 10)} == \
        {"second"}
    [match] = await store.search_entities(*scope, vec("s"), 10)
    assert (match.entity, match.label) == (shared, "S")
    await store.remove_document(*scope, "second")
    assert await store.count(*scope) == {"chunks": 0, "entities": 0}
    await store.remove_document(*scope, "never-added")


async def test_delete_collection_leaves_other_collections(store, scope):
    user, collection = scope
    for c in (collection, "kept"):
        await store.upsert_chunks(user, c, [chunk(n) for n in range(2)])
        await store.upsert_entities(user, c, [EntityVector(I("urn:e"), vec("e"), "E", "doc")])
    await store.delete_collection(user, collection)
    assert await store.count(user, collection) == {"chunks": 0, "entities": 0}
    assert await store.search_chunks(user, collection, vec("c0")) == []
    assert await store.count(user, "kept") == {"chunks": 2, "entities": 1}
    await store.upsert_chunks(user, collection, [chunk(9)])  # usable again
    assert await store.count(user, collection) == {"chunks": 1, "entities": 0}


async def test_unknown_scopes_are_empty(store, scope):
    assert await store.search_chunks(*scope, vec(0)) == []
    assert await store.search_entities(*scope, vec(0)) == []
    assert await store.count(*scope) == {"chunks": 0, "entities": 0}
    await store.remove_document(*scope, "doc")
    await store.delete_collection(*scope)


async def test_vectors_of_another_dimension_are_refused(store, scope):
    await store.upsert_chunks(*scope, [chunk(0)])
    with pytest.raises(Exception):
        await store.upsert_chunks(*scope, [chunk(1, vector=[0.5] * (DIM + 1))])


NASTY = ["it's", 'say "hi"', "{braces}", "../../etc", "a/b\\c", "'); DROP --", "$x",
         "line\nbreak", "ünïcødé ✓", ""]


async def test_values_with_metacharacters_round_trip(store):
    for n, value in enumerate(NASTY):
        user, collection = f"u{value}{random.getrandbits(30)}", f"c{value}"
        document = f"doc {value}"
        item = chunk(n, document, chunk_id=f"chunk {value}", text=value, title=value)
        await store.upsert_chunks(user, collection, [item])
        await store.upsert_entities(user, collection, [
            EntityVector(I(f"urn:{value}"), vec(n), value, document),
            EntityVector(L(value), vec(f"l{n}"), value, document)])
        [found] = await store.search_chunks(user, collection, item.vector, 1)
        assert (found.chunk_id, found.document, found.text, found.title) == \
            (f"chunk {value}", document, value, value)
        assert {(m.entity, m.label) for m in await store.search_entities(
            user, collection, vec(n), 5)} == {(I(f"urn:{value}"), value), (L(value), value)}
        await store.remove_document(user, collection, document)
        assert await store.count(user, collection) == {"chunks": 0, "entities": 0}


async def test_no_query_returns_another_users_or_collections_data(store):
    """The same chunk ids and entities in several scopes — including two whose user
    and collection concatenate alike — each search sees only its own scope."""
    run = f"{random.getrandbits(30):x}"
    scopes = [(f"alice{run}", "c1"), (f"alice{run}", "c2"), (f"bob{run}", "c1"),
              (f"x{run}", "y\0z"), (f"x{run}\0y", "z")]
    for n, scope in enumerate(scopes):
        await store.upsert_chunks(*scope, [chunk(0, text=f"mine {n}"), chunk(1)])
        await store.upsert_entities(*scope, [EntityVector(I("urn:e"), vec("e"), f"E{n}",
                                                          "doc")])
    for n, scope in enumerate(scopes):
        found = await store.search_chunks(*scope, vec("c0"), limit=10)
        assert sorted(m.text for m in found) == sorted([f"mine {n}", "text 1"])
        assert [m.label for m in await store.search_entities(*scope, vec("e"), 10)] == \
            [f"E{n}"]
        assert await store.count(*scope) == {"chunks": 2, "entities": 1}
    await store.remove_document(*scopes[0], "doc")
    await store.delete_collection(*scopes[1])
    for scope in scopes[:2]:
        assert await store.count(*scope) == {"chunks": 0, "entities": 0}
    for scope in scopes[2:]:
        assert await store.count(*scope) == {"chunks": 2, "entities": 1}


# -- the lexical index beside the chunk vectors ----------------------------------------

WORDS = ["The Roadrunner engine burns liquid oxygen and kerosene.",
         "Acme Rockets was founded in 1952 by Ada Quill in Tucson.",
         "The catalogue lists anvils, giant magnets and portable holes.",
         "A xylophagous beetle bored through the launch tower."]


def worded(n: int, document: str = "doc", **changes) -> ChunkVector:
    return chunk(n, document, **{"text": WORDS[n % len(WORDS)], **changes})


async def test_lexical_search_finds_an_exact_rare_term_the_vectors_do_not(store, scope):
    """The vectors here are random (they say nothing of the words): only the lexical
    index can find the chunk with "xylophagous"."""
    await store.upsert_chunks(*scope, [worded(n) for n in range(4)])
    [best, *_] = await store.search_lexical(*scope, "which beetle is xylophagous?", 10)
    assert (best.chunk_id, best.document, best.text, best.title) == \
        ("doc#c3", "doc", WORDS[3], "title of doc")
    assert best.score > 0
    found = await store.search_lexical(*scope, "liquid oxygen engine", 10)
    assert found[0].chunk_id == "doc#c0"
    assert [m.score for m in found] == sorted((m.score for m in found), reverse=True)
    assert await store.search_lexical(*scope, "the and of", 10) == []  # stop words only


async def test_lexical_index_matches_titles_and_heading_paths_and_keeps_citations(
        store, scope):
    meta = {"order": 0, "page_range": [3, 4], "header_titles": ["Engines", "Fuel"]}
    await store.upsert_chunks(*scope, [
        worded(0, title="Propulsion handbook", headings="Engines > Fuel", meta=meta),
        worded(1, "other")])
    [match] = await store.search_lexical(*scope, "handbook", 10)
    assert (match.chunk_id, match.meta) == ("doc#c0", meta)
    assert [m.chunk_id for m in await store.search_lexical(*scope, "fuel", 10)] == ["doc#c0"]
    [nearest] = await store.search_chunks(*scope, vec("c0"), 1)  # the vectors keep it too
    assert nearest.meta == meta


async def test_lexical_index_is_idempotent_and_forgets_removed_documents(store, scope):
    await store.upsert_chunks(*scope, [worded(n) for n in range(3)])
    await store.upsert_chunks(*scope, [worded(n) for n in range(3)])  # redelivered
    await store.upsert_chunks(*scope, [worded(n, "second") for n in range(2)])
    assert await store.lexical_count(*scope) == 5
    await store.upsert_chunks(*scope, [worded(1, text="replaced wording")])
    assert [m.chunk_id for m in await store.search_lexical(*scope, "replaced", 5)] == \
        ["doc#c1"]
    assert await store.lexical_count(*scope) == 5
    await store.remove_document(*scope, "doc")
    assert {m.document for m in await store.search_lexical(*scope, "engine acme", 10)} \
        == {"second"}
    assert await store.lexical_count(*scope) == 2
    await store.delete_collection(*scope)
    assert await store.lexical_count(*scope) == 0
    assert await store.search_lexical(*scope, "engine", 10) == []


async def test_lexical_index_drops_chunks_an_earlier_longer_version_left(store, scope):
    await store.upsert_chunks(*scope, [worded(n, version=1, index=n) for n in range(4)])
    await store.upsert_chunks(*scope, [worded(n, version=2, index=n) for n in range(2)])
    assert await store.remove_stale_chunks(*scope, "doc", 2, 2) == 2
    assert await store.lexical_count(*scope) == 2
    assert await store.search_lexical(*scope, "xylophagous", 5) == []


async def test_no_lexical_query_returns_another_users_or_collections_chunks(store):
    run = f"{random.getrandbits(30):x}"
    scopes = [(f"alice{run}", "c1"), (f"alice{run}", "c2"), (f"bob{run}", "c1"),
              (f"x{run}", "y\0z"), (f"x{run}\0y", "z")]
    for n, scope in enumerate(scopes):
        await store.upsert_chunks(*scope, [worded(0, text=f"shared word mine{n}")])
    for n, scope in enumerate(scopes):
        found = await store.search_lexical(*scope, "shared word", 10)
        assert [m.text for m in found] == [f"shared word mine{n}"]
        assert await store.search_lexical(*scope, f"mine{(n + 1) % len(scopes)}", 10) == []
    await store.remove_document(*scopes[0], "doc")
    await store.delete_collection(*scopes[1])
    assert [await store.lexical_count(*s) for s in scopes] == [0, 0, 1, 1, 1]
# -- stored chunks (what chunk-count and load-status report): per version, per scope --

def chunks(document: str, count: int, version: int) -> list[ChunkVector]:
    return [ChunkVector(chunk_id=f"{document}/c{n}", document=document,
                        vector=vec(f"{document}{n}{version}"), text=f"text {n}",
                        version=version) for n in range(count)]


async def test_chunks_are_counted_per_document_and_version(store, scope):
    user, collection = scope
    assert await store.stored_chunks(user, collection, [("a", 1)]) == [0]  # no space yet
    await store.upsert_chunks(user, collection, chunks("a", 3, 1) + chunks("b", 2, 1))
    assert await store.stored_chunks(user, collection, [("a", 1), ("b", 1), ("a", 2)]) == [
        3, 2, 0]
    # A re-load (version 2) overwrites the chunks it has: only those count for it.
    await store.upsert_chunks(user, collection, chunks("a", 2, 2))
    assert await store.stored_chunks(user, collection, [("a", 2), ("a", 1)]) == [2, 1]
    assert await store.stored_chunks(user, "elsewhere", [("a", 2)]) == [0]
    assert await store.stored_chunks("someone-else", collection, [("a", 2)]) == [0]
    assert await store.stored_chunks(user, collection, []) == []


def indexed(document: str, count: int, version: int) -> list[ChunkVector]:
    return [ChunkVector(chunk_id=f"{document}/c{n}", document=document,
                        vector=vec(f"{document}{n}{version}"), text=f"v{version} {n}",
                        version=version, index=n) for n in range(count)]


async def test_a_shorter_version_drops_only_the_tail_an_older_version_left(store, scope):
    user, collection = scope
    await store.upsert_chunks(user, collection, indexed("a", 5, 1) + indexed("b", 5, 1))
    await store.upsert_chunks(user, collection, indexed("a", 1, 2))  # v2's first chunk
    assert await store.remove_stale_chunks(user, collection, "a", 2, total=2) == 3
    # a/c1 (v1) stays until v2's own c1 replaces it; b is another document.
    assert await store.stored_chunks(user, collection, [("a", 2), ("a", 1), ("b", 1)]) == [
        1, 1, 5]
    assert await store.remove_stale_chunks(user, collection, "a", 2, total=2) == 0
    # A version never drops a newer version's chunks.
    await store.upsert_chunks(user, collection, indexed("b", 5, 3))
    assert await store.remove_stale_chunks(user, collection, "b", 2, total=1) == 0


# -- Qdrant Edge: indexing aside -----------------------------------------------------

async def test_the_first_stamped_vectors_stamp_the_scope_with_their_model(store, scope):
    user, collection = scope
    assert await store.model_of(user, collection) is None
    await store.upsert_chunks(user, collection, [chunk(0)], model="model-a")
    assert await store.model_of(user, collection) == "model-a"
    # Its own model's vectors, and vectors that do not say, are taken and searched.
    await store.upsert_chunks(user, collection, [chunk(1)], model="model-a")
    await store.upsert_chunks(user, collection, [chunk(2)])
    await store.upsert_entities(user, collection, [EntityVector(I("urn:e"), vec("e"), "e")],
                                model="model-a")
    assert len(await store.search_chunks(user, collection, vec("c1"), 5, "model-a")) == 3
    assert len(await store.search_chunks(user, collection, vec("c1"), 5)) == 3
    # A store opened afresh on the same backend reads the stamp back.
    assert await VectorStore(store.backend).model_of(user, collection) == "model-a"
    assert await store.count(user, collection) == {"chunks": 3, "entities": 1}


async def test_a_scope_embedded_by_one_model_refuses_another_models_vectors(store, scope):
    user, collection = scope
    await store.upsert_chunks(user, collection, [chunk(0)], model="model-a")
    with pytest.raises(ModelMismatch, match="embedded with 'model-a'.*'model-b'.*tg-reembed"):
        await store.search_chunks(user, collection, vec("c0"), 5, "model-b")
    with pytest.raises(ModelMismatch, match="model-a"):
        await store.search_entities(user, collection, vec("e"), 5, "model-b")
    with pytest.raises(ModelMismatch, match="holds vectors of 'model-a'"):
        await store.upsert_chunks(user, collection, [chunk(1)], model="model-b")
    with pytest.raises(ModelMismatch):
        await store.upsert_entities(user, collection, [EntityVector(I("urn:e"), vec("e"))],
                                    model="model-b")
    assert await store.count(user, collection) == {"chunks": 1, "entities": 0}
    # Another collection is stamped by its own first vectors.
    await store.upsert_chunks(user, "other", [chunk(0)], model="model-b")
    assert await store.model_of(user, "other") == "model-b"
    # Deleting the collection forgets its model.
    await store.delete_collection(user, collection)
    assert await store.model_of(user, collection) is None
    await store.upsert_chunks(user, collection, [chunk(0)], model="model-b")
    assert await store.model_of(user, collection) == "model-b"


async def test_reembedding_moves_a_scope_to_another_model(store, scope):
    user, collection = scope
    await store.upsert_chunks(user, collection, [chunk(n) for n in range(5)], model="old")
    await store.upsert_entities(user, collection, [EntityVector(I("urn:e"), vec("e"), "e")],
                                model="old")
    asked: list[list[str]] = []

    async def new_model(texts: list[str]) -> tuple[list[list[float]], str]:
        asked.append(texts)
        if len(asked) == 2:  # mid-way, the scope refuses searches of either model
            for model in ("old", "new"):
                with pytest.raises(ModelMismatch, match="being re-embedded from 'old'"):
                    await store.search_chunks(user, collection, vec("q"), 3, model)
        return [vec(f"new {t}") for t in texts], "new"

    steps = [(p.done["chunks"], p.done["entities"]) async for p in
             reembed(store, user, collection, new_model, embed_title=True, page=2)]
    assert steps == [(2, 0), (4, 0), (5, 0), (5, 1)]
    assert sorted(t for page in asked for t in page) == sorted(
        [f"title of doc\n\ntext {n}" for n in range(5)] + ["e"])
    assert await store.model_of(user, collection) == "new"
    found = await store.search_chunks(user, collection, vec("new title of doc\n\ntext 3"),
                                      1, "new")
    assert found[0].chunk_id == "doc#c3" and found[0].score == pytest.approx(1.0)
    with pytest.raises(ModelMismatch):
        await store.search_chunks(user, collection, vec("q"), 3, "old")


async def test_reembedding_refuses_a_model_of_another_size_before_changing_anything(
        store, scope):
    user, collection = scope
    await store.upsert_chunks(user, collection, [chunk(0)], model="old")

    async def wider(texts: list[str]) -> tuple[list[list[float]], str]:
        return [[0.5] * (DIM * 2) for _ in texts], "wide"

    with pytest.raises(ModelMismatch, match="another size"):
        async for _ in reembed(store, user, collection, wider):
            pass
    assert await store.model_of(user, collection) == "old"
    assert len(await store.search_chunks(user, collection, vec("c0"), 1, "old")) == 1


async def test_pages_list_every_point_of_a_space_once(store, scope):
    user, collection = scope
    await store.upsert_chunks(user, collection, [chunk(n) for n in range(7)])
    seen, after = [], None
    while True:
        points, after = await store.backend.page(Space("chunks", user, collection), after, 3)
        assert len(points) <= 3
        seen += [p.payload["chunk_id"] for p in points]
        if after is None:
            break
    assert sorted(seen) == sorted(f"doc#c{n}" for n in range(7))
    assert await store.backend.page(Space("chunks", user, "nothing"), None, 3) == ([], None)


async def test_pages_with_vectors_give_each_point_its_vector(store, scope):
    """What a knowledge core exports: every point once, with its vector (a cosine
    space stores it normalised)."""
    user, collection = scope
    await store.upsert_chunks(user, collection, [chunk(n) for n in range(7)])
    found, after = {}, None
    while True:
        points, after = await store.page("chunks", user, collection, after, 3)
        found.update((p.payload["chunk_id"], p.vector) for p in points)
        if after is None:
            break
    assert found.keys() == {f"doc#c{n}" for n in range(7)}
    for n in range(7):
        given = vec(f"c{n}")
        norm = sum(x * x for x in given) ** 0.5
        assert found[f"doc#c{n}"] == pytest.approx([x / norm for x in given], abs=1e-6)


async def test_edge_indexes_aside_and_keeps_the_writes_made_meanwhile(shard_dir, caplog):
    caplog.set_level(logging.INFO, "trustgraph.storage.vectors.qdrant_edge")
    tmp_path = shard_dir
    backend = EdgeBackend(tmp_path, index_after=300, quiet=0)
    space = Space("chunks", "u", "c")
    point = lambda n: Point(f"00000000-0000-0000-0000-{n:012d}", vec(n), {"n": n})
    try:
        await backend.upsert(space, [point(n) for n in range(400)])
        assert backend._builds, "a build should have started"
        await asyncio.sleep(0.05)  # the copy is made; the builder process starts
        await backend.upsert(space, [point(n) for n in range(400, 450)])
        await backend.delete(space, [point(n).id for n in range(10)])
        assert await backend.count(space) == 440  # served while the build runs
        await backend.wait_for_indexing()
        assert "swapped in" in caplog.text
        assert await backend.count(space) == 440
        [(payload, score)] = await backend.search(space, vec(420), 1)
        assert payload == {"n": 420}
        assert (await backend.search(space, vec(3), 1))[0][0] != {"n": 3}
        assert not list(tmp_path.glob("*.build")) and not list(tmp_path.glob("*.old"))
    finally:
        await backend.close()
    reopened = EdgeBackend(tmp_path)
    try:
        assert await reopened.count(space) == 440
    finally:
        await reopened.close()


async def test_edge_builds_at_first_search_the_index_a_restart_left_unbuilt(shard_dir,
                                                                           caplog):
    """Written, then closed before writes paused long enough to index (a restart
    right after a big import): the next process's first search starts the build."""
    caplog.set_level(logging.INFO, "trustgraph.storage.vectors.qdrant_edge")
    space = Space("chunks", "u", "c")
    writer = EdgeBackend(shard_dir, index_after=300, quiet=3600)
    try:
        await writer.upsert(space, [Point(f"00000000-0000-0000-0000-{n:012d}", vec(n),
                                          {"n": n}) for n in range(400)])
    finally:
        await writer.close()
    assert "swapped in" not in caplog.text
    reader = EdgeBackend(shard_dir, index_after=300, quiet=0)
    try:
        [(payload, _)] = await reader.search(space, vec(7), 1)
        assert payload == {"n": 7}
        assert reader._builds, "the first search should start the missed build"
        await reader.wait_for_indexing()
        assert "swapped in" in caplog.text
        assert await reader.count(space) == 400
    finally:
        await reader.close()


async def test_edge_cancelled_call_does_not_leave_its_reply_to_the_next(shard_dir):
    backend = EdgeBackend(shard_dir)
    space = Space("chunks", "u", "c")
    try:
        await backend.upsert(space, [Point(f"00000000-0000-0000-0000-{n:012d}", vec(n), {})
                                     for n in range(3)])
        for _ in range(5):
            search = asyncio.create_task(backend.search(space, vec(1), 3))
            await asyncio.sleep(0)  # sent, not yet answered
            search.cancel()
            assert await backend.count(space) == 3
    finally:
        await backend.close()


async def test_edge_worker_restarts_after_it_dies(shard_dir):
    backend = EdgeBackend(shard_dir)
    space = Space("chunks", "u", "c")
    try:
        await backend.upsert(space, [Point("00000000-0000-0000-0000-000000000001", vec(1), {})])
        backend._worker.kill()
        await backend._worker.wait()
        assert await backend.count(space) == 1  # a new worker, same shards
    finally:
        await backend.close()


def test_edge_repairs_a_swap_interrupted_by_a_crash(tmp_path):
    for name in ("restored.old", "complete", "complete.old", "partial.build"):
        (tmp_path / name).mkdir()
    edge_shards.start(str(tmp_path), 20000)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["complete", "restored"]
