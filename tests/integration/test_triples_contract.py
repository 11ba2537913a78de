"""One contract, every triples backend: SQLite (embedded), and the Neo4j backend
against a real Bolt server — ArcadeDB with its Bolt plugin, started once per session,
and a real Neo4j when NEO4J_URI (+ NEO4J_USER / NEO4J_PASSWORD) is set.

The graph servers persist between tests, so every test works in scopes (user,
collection) of its own."""
import asyncio
import json
import os
import time
import uuid
from collections import Counter

import pytest

from trustgraph.schema import RDFS_LABEL, Term, Triple
from trustgraph.storage.triples.neo4j import Neo4jTriplesStore
from trustgraph.storage.triples.sqlite import SqliteTriplesStore
from trustgraph.storage.triples.store import expand

I, L = Term.iri, Term.literal  # noqa: E741 (the wire's term kinds "i", "l")
LABEL = I(RDFS_LABEL)


def t(s: str, p: str, o: Term | str) -> Triple:
    return Triple(s=I(s), p=I(p), o=o if isinstance(o, Term) else I(o))


@pytest.fixture(params=["sqlite", "neo4j-arcadedb", "neo4j"])
async def store(request, tmp_path):
    if request.param == "sqlite":
        store = await SqliteTriplesStore.open(tmp_path / "triples.sqlite")
    elif request.param == "neo4j-arcadedb":
        server = request.getfixturevalue("arcadedb")
        store = await Neo4jTriplesStore.open(server.uri, server.user, server.password,
                                             server.database)
    elif os.environ.get("NEO4J_URI"):
        store = await Neo4jTriplesStore.open(
            os.environ["NEO4J_URI"], os.environ.get("NEO4J_USER", "neo4j"),
            os.environ.get("NEO4J_PASSWORD", ""), os.environ.get("NEO4J_DATABASE"))
    else:
        pytest.skip("set NEO4J_URI (+ NEO4J_USER, NEO4J_PASSWORD) to run against Neo4j")
    yield store
    await store.close()


@pytest.fixture
def scope():
    """A fresh (user, collection) for this test."""
    return f"user-{uuid.uuid4().hex[:8]}", "default"


GRAPH = [
    t("a", "knows", "b"), t("b", "knows", "c"), t("a", "likes", "c"),
    t("c", "knows", "a"), t("a", RDFS_LABEL, L("Alice")), t("b", RDFS_LABEL, L("Bob")),
    t("c", "age", L("42")), t("d", "age", L("42")),
]


async def test_pattern_queries_match_every_combination_of_bound_positions(store, scope):
    await store.add(*scope, GRAPH, document="doc")
    cases = [dict(), dict(s=I("a")), dict(p=I("knows")), dict(o=I("c")), dict(o=L("42")),
             dict(s=I("a"), p=I("knows")), dict(s=I("c"), o=I("a")),
             dict(p=I("age"), o=L("42")), dict(s=I("a"), p=I("likes"), o=I("c")),
             dict(s=I("zz")), dict(o=L("c"))]  # a literal "c" is not the IRI c
    for bound in cases:
        expected = {x for x in GRAPH if all(getattr(x, k) == v for k, v in bound.items())}
        assert set(await store.query(*scope, **bound)) == expected, bound


async def test_query_limit_and_count(store, scope):
    await store.add(*scope, GRAPH, document="doc")
    assert len(await store.query(*scope, limit=3)) == 3
    assert await store.count(*scope) == len(GRAPH)


async def test_adding_again_is_idempotent_and_other_provenance_adds_no_duplicate(store, scope):
    await store.add(*scope, GRAPH, document="doc", chunk="c1")
    await store.add(*scope, GRAPH, document="doc", chunk="c1")
    await store.add(*scope, GRAPH[:3], document="doc", chunk="c2")
    await store.add(*scope, GRAPH[:3], document="other")
    assert await store.count(*scope) == len(GRAPH)
    assert sorted(map(str, await store.query(*scope))) == sorted(map(str, GRAPH))


async def test_removing_a_document_keeps_triples_another_document_supports(store, scope):
    shared, only_first, only_second = GRAPH[0], GRAPH[1], GRAPH[2]
    await store.add(*scope, [shared, only_first], document="first", chunk="1")
    await store.add(*scope, [shared], document="first", chunk="2")
    await store.add(*scope, [shared, only_second], document="second")
    await store.remove_document(*scope, "first")
    assert set(await store.query(*scope)) == {shared, only_second}
    assert set(await store.neighbours(*scope, [I("b")])) == {shared}
    await store.remove_document(*scope, "second")
    assert await store.query(*scope) == [] and await store.count(*scope) == 0
    assert await store.neighbours(*scope, [I("a"), I("b")]) == []
    await store.remove_document(*scope, "never-added")


async def test_neighbours_of_many_entities_follow_both_directions(store, scope):
    await store.add(*scope, GRAPH, document="doc")
    found = await store.neighbours(*scope, [I("b"), I("d"), L("42"), I("absent")])
    assert set(found) == {GRAPH[0], GRAPH[1], GRAPH[5], GRAPH[7]}
    assert len(found) == len(set(found))
    assert await store.neighbours(*scope, []) == []


async def test_neighbours_are_limited_per_entity(store, scope):
    hub = [t("hub", "has", f"spoke{i}") for i in range(12)]
    await store.add(*scope, hub + [t("x", "knows", "y")], document="doc")
    found = await store.neighbours(*scope, [I("hub"), I("x")], limit_per_entity=5)
    assert t("x", "knows", "y") in found
    assert len([x for x in found if x.s == I("hub")]) == 5
    assert set(found) <= set(hub) | {t("x", "knows", "y")}


async def test_labels_of_many_entities_at_once(store, scope):
    await store.add(*scope, GRAPH, document="doc")
    labels = await store.labels(*scope, [I("a"), I("b"), I("c"), L("a"), I("absent")])
    assert labels == {I("a"): "Alice", I("b"): "Bob"}
    assert await store.labels(*scope, []) == {}


async def test_provenance_of_many_triples_names_their_document_and_chunk(store, scope):
    await store.add(*scope, GRAPH[:4], document="doc-b", chunk="b/c1")
    await store.add(*scope, GRAPH[4:], document="doc-a", chunk="a/c0")
    # GRAPH[0] also found in two more places: the least (document, chunk) is named
    await store.add(*scope, GRAPH[:1], document="doc-a", chunk="a/c9")
    await store.add(*scope, GRAPH[:1], document="doc-a", chunk="a/c2")
    absent = t("a", "knows", "zz")
    wanted = [GRAPH[0], GRAPH[1], GRAPH[5], GRAPH[7], absent, GRAPH[1],
              t("c", "age", "42"),  # the IRI 42, not the literal stored
              Triple(s=L("a"), p=I("knows"), o=I("b"))]  # a literal subject: never stored
    assert await store.provenance(*scope, wanted) == {
        GRAPH[0]: ("doc-a", "a/c2"), GRAPH[1]: ("doc-b", "b/c1"),
        GRAPH[5]: ("doc-a", "a/c0"), GRAPH[7]: ("doc-a", "a/c0")}
    assert await store.provenance(*scope, []) == {}
    await store.remove_document(*scope, "doc-a")
    assert await store.provenance(*scope, GRAPH) == {x: ("doc-b", "b/c1") for x in GRAPH[:4]}


async def test_provenance_of_a_large_batch_in_one_call(store, scope):
    triples = [t(f"e{i}", "rel", L(f"v{i}")) for i in range(1500)]
    for start in range(0, 1500, 500):
        await store.add(*scope, triples[start:start + 500], document=f"d{start}",
                        chunk=f"d{start}/c0")
    found = await store.provenance(*scope, triples)
    assert found == {x: (f"d{i // 500 * 500}", f"d{i // 500 * 500}/c0")
                     for i, x in enumerate(triples)}


CHAIN = [t("n0", "next", "n1"), t("n1", "next", "n2"), t("n2", "next", "n3"),
         t("n3", "next", "n4"), t("n1", RDFS_LABEL, L("one"))]


async def test_expansion_follows_paths_up_to_max_hops(store, scope):
    await store.add(*scope, CHAIN, document="doc")
    one = await expand(store, *scope, [I("n0")], max_hops=1)
    assert set(one.triples) == {CHAIN[0]} and one.entities == [I("n0"), I("n1")]
    two = await expand(store, *scope, [I("n0")], max_hops=2)
    # label triples are not followed or kept: labels are looked up for the subgraph
    assert set(two.triples) == {CHAIN[0], CHAIN[1]} and two.hops == 2
    assert two.entities == [I("n0"), I("n1"), I("n2")]
    everything = await expand(store, *scope, [I("n2")], max_hops=5)
    assert set(everything.triples) == set(CHAIN[:4]) and everything.hops == 3


async def test_expansion_respects_triple_and_entity_budgets(store, scope):
    await store.add(*scope, CHAIN, document="doc")
    few = await expand(store, *scope, [I("n0")], max_hops=5, max_triples=2)
    assert len(few.triples) == 2
    narrow = await expand(store, *scope, [I("n0")], max_hops=5, max_entities=2)
    assert narrow.entities == [I("n0"), I("n1")]
    assert set(narrow.triples) == {CHAIN[0], CHAIN[1]}  # n2 reached, not followed


async def test_expansion_makes_one_round_trip_per_hop(store, scope):
    await store.add(*scope, [t("s", "to", f"m{i}") for i in range(5)]
                    + [t(f"m{i}", "to", f"e{i}") for i in range(5)], document="doc")
    calls = []

    class Counting:
        async def neighbours(self, *args, **kwargs):
            calls.append(args[2])
            return await store.neighbours(*args, **kwargs)

    graph = await expand(Counting(), *scope, [I("s")], max_hops=3)
    assert len(graph.triples) == 10 and graph.hops == 3  # the third hop finds nothing new
    assert [len(frontier) for frontier in calls] == [1, 5, 5]


async def test_delete_collection_leaves_other_collections(store, scope):
    user, collection = scope
    await store.add(user, collection, GRAPH, document="doc")
    await store.add(user, "kept", GRAPH, document="doc")
    await store.add(f"{user}-other", collection, GRAPH, document="doc")
    assert await store.delete_collection(user, collection) == len(GRAPH)
    assert await store.delete_collection(user, collection) == 0  # safe to repeat
    assert await store.delete_collection(user, "never-written") == 0
    assert await store.count(user, collection) == 0
    assert await store.count(f"{user}-other", collection) == len(GRAPH)
    assert await store.query(user, collection) == []
    assert await store.count(user, "kept") == len(GRAPH)
    await store.add(user, collection, GRAPH[:2], document="doc")  # usable again
    assert await store.count(user, collection) == 2


async def test_subject_and_predicate_must_be_iris(store, scope):
    with pytest.raises(ValueError):
        await store.add(*scope, [Triple(s=L("x"), p=I("p"), o=I("o"))], document="doc")
    with pytest.raises(ValueError):
        await store.add(*scope, [Triple(s=I("x"), p=L("p"), o=I("o"))], document="doc")
    assert await store.query(*scope, s=L("x")) == []


NASTY = ["it's", 'say "hi"', "{braces}", "a}) DETACH DELETE n //", "'); DROP TABLE triples; --",
         "$user", "back\\slash", "100%_like", "line\nbreak", "ünïcødé ✓", "", " "]


async def test_values_with_query_metacharacters_round_trip(store, scope):
    triples = [t(f"urn:{v}", f"urn:p{v}", L(v)) for v in NASTY]
    triples += [t(f"urn:{v}", RDFS_LABEL, L(f"label {v}")) for v in NASTY]
    triples += [t("urn:hub", "urn:to", f"urn:{v}") for v in NASTY]
    await store.add(*scope, triples, document=NASTY[3], chunk=NASTY[4])
    assert set(await store.query(*scope)) == set(triples)
    for v in NASTY:
        assert set(await store.query(*scope, s=I(f"urn:{v}"), p=I(f"urn:p{v}"))) == \
            {t(f"urn:{v}", f"urn:p{v}", L(v))}
        assert await store.query(*scope, o=L(v)) == [t(f"urn:{v}", f"urn:p{v}", L(v))]
    entities = [I(f"urn:{v}") for v in NASTY]
    assert await store.labels(*scope, entities) == {e: f"label {e.i[4:]}" for e in entities}
    assert len(await store.neighbours(*scope, entities, limit_per_entity=10)) == len(triples)
    await store.remove_document(*scope, NASTY[3])
    assert await store.count(*scope) == 0


async def test_large_batches_are_written_whole(store, scope):
    triples = [t(f"e{i % 7}", "rel", f"e{i}") for i in range(1200)]
    await store.add(*scope, triples, document="big")
    assert await store.count(*scope) == 1200


async def test_a_large_write_does_not_stall_the_event_loop(store, scope):
    triples = [t(f"e{i}", "rel", f"e{i + 1}") for i in range(5000)]
    probe = [I(f"e{i}") for i in range(0, 5000, 10)]
    gaps: list[float] = []  # the loop thread's CPU time between two ticks

    async def tick():
        while True:
            started = time.thread_time()
            await asyncio.sleep(0.005)
            gaps.append(time.thread_time() - started)

    ticker = asyncio.create_task(tick())
    loop_cpu = time.thread_time()
    await store.add(*scope, triples, document="big")
    await store.neighbours(*scope, probe)
    loop_cpu = time.thread_time() - loop_cpu
    ticker.cancel()
    # The loop thread's CPU time, not wall time, so a busy machine (a process not
    # scheduled for a while) cannot fail it: a write done on the loop in one piece
    # is one gap holding most of the loop's CPU; a store that yields (a thread, an
    # async driver) leaves gaps of a few milliseconds.
    assert len(gaps) > 3 and max(gaps) < max(loop_cpu / 2, 0.01), (max(gaps), loop_cpu)


async def test_no_query_returns_another_users_or_collections_data(store):
    """The same IRIs in three scopes; every read sees only its own scope."""
    run = uuid.uuid4().hex[:8]
    scopes = [(f"alice-{run}", "c1"), (f"alice-{run}", "c2"), (f"bob-{run}", "c1")]
    for n, (user, collection) in enumerate(scopes):
        await store.add(user, collection, [
            t("a", "knows", "b"), t("b", "knows", f"only{n}"),
            t("a", RDFS_LABEL, L(f"label{n}")), t("a", "marker", L(f"value{n}"))],
            document="doc")
    for n, scope in enumerate(scopes):
        mine = {t("a", "knows", "b"), t("b", "knows", f"only{n}"),
                t("a", RDFS_LABEL, L(f"label{n}")), t("a", "marker", L(f"value{n}"))}
        assert set(await store.query(*scope)) == mine
        assert set(await store.query(*scope, s=I("a"), p=I("marker"))) == \
            {t("a", "marker", L(f"value{n}"))}
        for m in range(3):
            expected = [t("a", "marker", L(f"value{n}"))] if m == n else []
            assert await store.query(*scope, o=L(f"value{m}")) == expected
            assert await store.neighbours(*scope, [I(f"only{m}")]) == \
                ([t("b", "knows", f"only{n}")] if m == n else [])
        assert set(await store.neighbours(*scope, [I("b")])) == \
            {t("a", "knows", "b"), t("b", "knows", f"only{n}")}
        assert await store.labels(*scope, [I("a")]) == {I("a"): f"label{n}"}
        graph = await expand(store, *scope, [I("a")], max_hops=3)
        assert set(graph.triples) == mine - {t("a", RDFS_LABEL, L(f"label{n}"))}
        assert await store.count(*scope) == 4
    await store.remove_document(*scopes[0], "doc")
    await store.delete_collection(*scopes[1])
    assert await store.count(*scopes[0]) == 0 and await store.count(*scopes[1]) == 0
    assert await store.count(*scopes[2]) == 4
    assert await store.query(f"nobody-{run}", "c1") == []


async def test_provenance_never_comes_from_another_user_or_collection(store):
    run = uuid.uuid4().hex[:8]
    scopes = [(f"alice-{run}", "c1"), (f"alice-{run}", "c2"), (f"bob-{run}", "c1")]
    shared = t("a", "knows", "b")
    for n, scope in enumerate(scopes):
        await store.add(*scope, [shared, t("a", "knows", f"only{n}")], document=f"doc{n}",
                        chunk=f"doc{n}/c0")
    for n, scope in enumerate(scopes):
        others = [t("a", "knows", f"only{m}") for m in range(3) if m != n]
        assert await store.provenance(*scope, [shared, *others]) == \
            {shared: (f"doc{n}", f"doc{n}/c0")}
    assert await store.provenance(f"nobody-{run}", "c1", [shared]) == {}
    await store.remove_document(*scopes[0], "doc0")
    assert await store.provenance(*scopes[0], [shared]) == {}
    assert await store.provenance(*scopes[1], [shared]) == {shared: ("doc1", "doc1/c0")}


async def test_chunk_triples_are_the_triples_extracted_from_each_chunk(store, scope):
    await store.add(*scope, GRAPH[:2], document="doc-b", chunk="b/c1")
    await store.add(*scope, GRAPH[6:], document="doc-a", chunk="a/c0")  # literal objects
    await store.add(*scope, [GRAPH[0], t("a", "age", "42")], document="doc-a", chunk="a/c2")
    assert await store.chunk_triples(*scope, ["b/c1", "a/c0", "a/c2", "none", "b/c1"]) == {
        "b/c1": GRAPH[:2], "a/c0": GRAPH[6:],
        "a/c2": [t("a", "age", "42"), GRAPH[0]]}  # ascending: "age" < "knows"
    assert await store.chunk_triples(*scope, []) == {}
    await store.remove_document(*scope, "doc-a")
    assert await store.chunk_triples(*scope, ["a/c0", "a/c2"]) == {}


async def test_chunk_triples_never_come_from_another_user_or_collection(store):
    run = uuid.uuid4().hex[:8]
    scopes = [(f"alice-{run}", "c1"), (f"alice-{run}", "c2"), (f"bob-{run}", "c1")]
    for n, scope in enumerate(scopes):  # the same chunk id in every scope
        await store.add(*scope, [t("a", "knows", f"only{n}")], document="doc",
                        chunk="doc/c0")
    for n, scope in enumerate(scopes):
        assert await store.chunk_triples(*scope, ["doc/c0"]) == {
            "doc/c0": [t("a", "knows", f"only{n}")]}
    assert await store.chunk_triples(f"nobody-{run}", "c1", ["doc/c0"]) == {}


async def test_provenance_prefers_the_chunks_asked_for_when_a_triple_has_several(store, scope):
    await store.add(*scope, GRAPH[:2], document="doc-a", chunk="a/c0")
    await store.add(*scope, GRAPH[:1], document="doc-z", chunk="z/c7")
    await store.add(*scope, GRAPH[:1], document="doc-y", chunk="y/c1")
    assert await store.provenance(*scope, GRAPH[:2], prefer=["z/c7", "y/c1"]) == {
        GRAPH[0]: ("doc-y", "y/c1"), GRAPH[1]: ("doc-a", "a/c0")}
    assert await store.provenance(*scope, GRAPH[:1], prefer=["none"]) == {
        GRAPH[0]: ("doc-a", "a/c0")}
# --- the graph version and entity-graph pages (what LazyRAG's community cache reads)


async def test_the_version_moves_on_every_change_and_only_then(store, scope):
    user, collection = scope
    assert await store.version(*scope) == 0
    await store.add(*scope, GRAPH, document="doc")
    added = await store.version(*scope)
    assert added > 0
    await store.remove_document(*scope, "never-added")
    assert await store.version(*scope) == added
    await store.add(*scope, [t("a", "knows", "z")], document="more")
    grown = await store.version(*scope)
    assert grown > added
    await store.remove_document(*scope, "more")
    shrunk = await store.version(*scope)
    assert shrunk > grown
    await store.delete_collection(*scope)
    deleted = await store.version(*scope)
    assert deleted > shrunk  # never back to 0: a cache built at 0 would look fresh
    await store.add(*scope, GRAPH, document="doc")
    assert await store.version(*scope) > deleted


async def test_the_version_is_per_scope(store, scope):
    user, collection = scope
    await store.add(user, collection, GRAPH, document="doc")
    assert await store.version(user, "other") == 0
    assert await store.version(f"{user}-other", collection) == 0


async def test_edges_pair_iris_with_their_triple_counts_over_pages(store, scope):
    user, collection = scope
    odd = 'C "the third"\tété\n\\'  # JSON's escapes, and not ASCII
    await store.add(*scope, [*GRAPH, t("a", "self", "a"), t("a", "knows", "c"),
                             t("c", RDFS_LABEL, L(odd))], document="doc")
    await store.add(user, "other", [t("x", "knows", "y")], document="doc")
    weights: Counter[tuple[str, str]] = Counter()
    labels: dict[str, str] = {}
    after, pages = 0, 0
    while after is not None:
        page = await store.edges(*scope, after=after, limit=2)
        weights.update({(s, o): weight for s, o, weight in json.loads(page.edges)})
        labels.update(json.loads(page.labels))
        after, pages = page.next, pages + 1
    # a→c by two predicates weighs 2; literals and the self-loop are left out
    assert weights == {("a", "b"): 1, ("b", "c"): 1, ("a", "c"): 2, ("c", "a"): 1}
    assert pages >= 2
    assert labels == {"a": "Alice", "b": "Bob", "c": odd}
    nobody = await store.edges(f"{user}-nobody", collection)
    assert (json.loads(nobody.edges), json.loads(nobody.labels), nobody.next) == ([], {}, None)
