"""The triples stores' graph version and entity-graph pages (what LazyRAG's community
cache reads), on every backend of test_triples_contract.py."""
from collections import Counter

from tests.integration.test_triples_contract import (  # noqa: F401 (fixtures)
    GRAPH, I, arcadedb, scope, store, t)


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
    await store.add(*scope, [*GRAPH, t("a", "self", "a"), t("a", "knows", "c")],
                    document="doc")
    await store.add(user, "other", [t("x", "knows", "y")], document="doc")
    weights: Counter[tuple[str, str]] = Counter()
    labels: dict[str, str] = {}
    after, pages = 0, 0
    while after is not None:
        page = await store.edges(*scope, after=after, limit=2)
        weights.update(page.weights)
        labels.update(page.labels)
        after, pages = page.next, pages + 1
    # a→c by two predicates weighs 2; literals and the self-loop are left out
    assert weights == {("a", "b"): 1, ("b", "c"): 1, ("a", "c"): 2, ("c", "a"): 1}
    assert pages >= 2
    assert labels == {"a": "Alice", "b": "Bob"}
    assert (await store.edges(f"{user}-nobody", collection)).weights == {}
