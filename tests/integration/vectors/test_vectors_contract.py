"""One contract, every vector backend (the backends: conftest.py): search, upserts,
removals and scopes, the lexical index beside the chunk vectors, and the stored chunks
chunk-count and load-status report."""
import math
import random

import pytest

from tests.support.vector_points import DIM, I, L, chunk, vec
from trustgraph.storage.vectors.store import ChunkVector, EntityVector

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect")


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
    for u, c in ((user, collection), (user, "kept"), (f"{user}-other", collection)):
        await store.upsert_chunks(u, c, [chunk(n) for n in range(2)])
        await store.upsert_entities(u, c, [EntityVector(I("urn:e"), vec("e"), "E", "doc")])
    assert await store.delete_collection(user, collection) == {
        "chunks": 2, "entities": 1, "lexical": 2}
    nothing = {"chunks": 0, "entities": 0, "lexical": 0}
    assert await store.delete_collection(user, collection) == nothing  # safe to repeat
    assert await store.delete_collection(user, "never-written") == nothing
    assert await store.search_lexical(user, collection, "text") == []
    assert await store.count(f"{user}-other", collection) == {"chunks": 2, "entities": 1}
    assert await store.lexical_count(f"{user}-other", collection) == 2
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
    with pytest.raises(Exception, match="(?i)dimension"):  # each backend's own type
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


async def test_one_chunk_of_a_version_is_counted_by_its_index(store, scope):
    user, collection = scope
    await store.upsert_chunks(user, collection, indexed("a", 3, 1))
    assert await store.stored_chunks(user, collection, [
        ("a", 1, 0), ("a", 1, 2), ("a", 1, 3), ("a", 2, 0), ("a", 1)]) == [1, 1, 0, 0, 3]


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
