"""The model that embedded a scope's vectors (its stamp, refusals, re-embedding) and
paging through a space, on every vector backend."""
import pytest

from tests.support.vector_points import DIM, I, chunk, vec
from trustgraph.storage.vectors.reembed import reembed
from trustgraph.storage.vectors.stamps import ModelMismatch
from trustgraph.storage.vectors.store import EntityVector, Space, VectorStore

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect")


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
