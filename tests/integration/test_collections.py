"""Collections as items of their own (``collection-management``, served by the
librarian): made by a load, named and tagged, listed, and deleted from every store
(the library, the triples store, the vector store's chunk and entity vectors and its
lexical index), saying what each removed; a delete touches no other user's or
collection's data, is safe to repeat, and one a store owner could not do is finished
by deleting again. On a real broker, through the gateway: our client over the
websocket, and the REST path TrustGraph's client posts to."""
import aiohttp
import pytest
import pytest_asyncio

from tests.support.cli import tg_command
from tests.support.ingest_stack import IngestStack, vector_of
from tests.support.waiting import eventually
from trustgraph.api import AsyncTrustGraph, TrustGraphError
from trustgraph.base import Processor
from trustgraph.schema import (
    LIBRARIAN_FLOW,
    Chunk,
    ChunkTriples,
    ChunkVector,
    DocumentRef,
    EntityVector,
    EntityVectors,
    Term,
    Triple,
)
from trustgraph.storage.vectors import service as service_vectors

pytestmark = pytest.mark.asyncio(loop_scope="module")

NOTHING = {"triples": 0, "chunks": 0, "entities": 0, "lexical": 0, "documents": 0}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(broker, tmp_path_factory):
    stack = IngestStack(broker, tmp_path_factory.mktemp("collections"), request_timeout=40)
    try:
        yield await stack.start()
    finally:
        await stack.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def client(stack):
    async with AsyncTrustGraph(stack.url) as client:
        yield client


async def rest(stack, body: dict) -> tuple[int, dict]:
    """``POST /api/v1/collection-management`` as TrustGraph's client sends it."""
    async with aiohttp.ClientSession() as http:
        async with http.post(stack.url + "api/v1/collection-management",
                             json={**body, "workspace": "default"}) as response:
            return response.status, await response.json()


async def fill(stack, client, user: str, collection: str) -> None:
    """A document in the library, two chunk vectors (and their lexical entries),
    three triples and two entity vectors in ``user``'s ``collection``; returns once
    every store holds them."""
    scope = {"user": user, "collection": collection}
    await client.load_text("Lovelace wrote the first program.", "doc", **scope,
                           flow=stack.flow)
    doc = DocumentRef(id="doc", **scope)
    for index, text in enumerate(("the analytical engine", "the first program")):
        await stack.emit("chunk-vectors", ChunkVector(
            chunk=Chunk(document=doc, id=f"doc/c{index}", index=index, text=text),
            vector=vector_of(text)))
    await stack.emit("triples", ChunkTriples(document=doc, chunk_id="doc/c0", triples=[
        Triple(s=Term.iri(f"http://ex/{s}"), p=Term.iri("http://ex/p"), o=Term.literal(o))
        for s, o in (("ada", "a"), ("ada", "b"), ("charles", "c"))]))
    await stack.emit("entity-vectors", EntityVectors(document=doc, entities=[
        EntityVector(entity=Term.iri(f"http://ex/{name}"), label=name,
                     vector=vector_of(name)) for name in ("ada", "charles")]))
    at = {**scope, "flow": stack.flow}

    async def stored() -> bool:
        return (len(await client.triples(**at)) == 3
                and len(await client.document_embeddings(vector_of("x"), **at)) == 2
                and len(await client.graph_embeddings(vector_of("x"), **at)) == 2)

    await eventually(stored, f"{user}/{collection} stored")


async def held(stack, client, user: str, collection: str) -> dict[str, int]:
    at = {"user": user, "collection": collection, "flow": stack.flow}
    return {"triples": len(await client.triples(**at)),
            "chunks": len(await client.document_embeddings(vector_of("x"), **at)),
            "entities": len(await client.graph_embeddings(vector_of("x"), **at)),
            "documents": len(await client.list_documents(user, collection))}


async def test_a_delete_a_store_owner_could_not_do_is_finished_by_deleting_again(
        stack, client):
    """First in the module: the librarian has not heard from the vector store's delete
    yet, so the request is given up after 5 s (one heard from lately is waited for
    20 s: within this stack's request timeout too)."""
    await fill(stack, client, "cm5", "half")
    vectors = next(p for p in stack.started if p.spec is service_vectors.SPEC)
    settings = vectors.settings
    await vectors.stop()
    stack.started.remove(vectors)
    with pytest.raises(TrustGraphError) as failed:
        await client.delete_collection("half", user="cm5")
    assert failed.value.type == "collection-delete-error"
    assert "not deleted from vector-store (no-service" in failed.value.message
    assert "deleted so far: triples (3)" in failed.value.message
    # The library's part waits for every store's: the collection is still listed.
    assert [c["collection"] for c in await client.list_collections(user="cm5")] == ["half"]
    assert len(await client.list_documents("cm5", "half")) == 1

    restarted = Processor(service_vectors.SPEC, settings)
    await restarted.start()
    stack.started.append(restarted)
    assert LIBRARIAN_FLOW in settings.tg_flows
    removed = await client.delete_collection("half", user="cm5")
    assert removed == {"triples": 0, "chunks": 2, "entities": 2, "lexical": 2,
                       "documents": 1}
    assert await client.list_collections(user="cm5") == []


async def test_a_load_makes_its_collection_and_update_names_it(stack, client):
    await client.load_text("Some text.", "t1", user="cm1", collection="notes",
                           flow=stack.flow)
    assert await client.list_collections(user="cm1") == [
        {"collection": "notes", "name": "", "description": "", "tags": []}]
    set_ = await client.set_collection("notes", name="Notes", description="mine",
                                       tags=["work", "2024"], user="cm1")
    assert set_ == {"collection": "notes", "name": "Notes", "description": "mine",
                    "tags": ["work", "2024"]}
    # What is not given stays as it was; a collection never loaded into is made.
    await client.set_collection("notes", description="still mine", user="cm1")
    await client.set_collection("empty", tags=["play"], user="cm1")
    assert await client.list_collections(user="cm1") == [
        {"collection": "empty", "name": "", "description": "", "tags": ["play"]},
        {"collection": "notes", "name": "Notes", "description": "still mine",
         "tags": ["work", "2024"]}]
    assert [c["collection"] for c in await client.list_collections(["work"], user="cm1")] \
        == ["notes"]
    assert await client.list_collections(user="someone-else") == []


async def test_trustgraphs_rest_path_lists_updates_and_deletes(stack):
    status, body = await rest(stack, {"operation": "update-collection", "user": "cm2",
                                      "collection": "papers", "name": "Papers",
                                      "tags": ["x"]})
    assert status == 200 and body["collections"] == [
        {"collection": "papers", "name": "Papers", "description": "", "tags": ["x"]}]
    status, body = await rest(stack, {"operation": "list-collections", "user": "cm2",
                                      "tag_filter": ["x", "y"]})
    assert status == 200 and [c["collection"] for c in body["collections"]] == ["papers"]
    status, body = await rest(stack, {"operation": "delete-collection", "user": "cm2",
                                      "collection": "papers"})
    assert status == 200 and body["removed"] == NOTHING
    status, body = await rest(stack, {"operation": "update-collection", "user": "cm2"})
    assert status == 400 and body["error"] == {
        "type": "bad-request", "message": "update-collection needs collection"}
    async with aiohttp.ClientSession() as http:  # a flow's service is not at this path
        async with http.post(stack.url + "api/v1/triples", json={}) as response:
            assert response.status == 404
            assert "POST /api/v1/flow/{flow}/service/triples" in \
                (await response.json())["error"]["message"]


async def test_knowledge_load_makes_its_collection(stack, client):
    await client.knowledge_load([{"s": {"t": "i", "i": "http://ex/a"},
                                  "p": {"t": "i", "i": "http://ex/p"},
                                  "o": {"t": "l", "v": "b"}}], "kg.ttl", user="cm3",
                                collection="graph", flow=stack.flow)
    assert [c["collection"] for c in await client.list_collections(user="cm3")] == ["graph"]


async def test_delete_removes_everything_from_every_store_and_nothing_else(stack, client):
    for user, collection in (("cm4", "doomed"), ("cm4", "kept"), ("cm4-other", "doomed")):
        await fill(stack, client, user, collection)
    before = await held(stack, client, "cm4", "doomed")
    assert before == {"triples": 3, "chunks": 2, "entities": 2, "documents": 1}

    removed = await client.delete_collection("doomed", user="cm4")
    assert removed == {**before, "lexical": 2}
    assert await held(stack, client, "cm4", "doomed") == dict.fromkeys(before, 0)
    assert await client.list_collections(user="cm4") == [
        {"collection": "kept", "name": "", "description": "", "tags": []}]
    for user, collection in (("cm4", "kept"), ("cm4-other", "doomed")):
        assert await held(stack, client, user, collection) == before
    # Safe to repeat; a collection that never was removes nothing either.
    assert await client.delete_collection("doomed", user="cm4") == NOTHING
    assert await client.delete_collection("never", user="cm4") == NOTHING
    # Usable again: a load makes it anew.
    await fill(stack, client, "cm4", "doomed")
    assert await held(stack, client, "cm4", "doomed") == before


async def test_a_socket_request_with_no_flow_as_trustgraphs_socket_client_sends_it(stack,
                                                                                   client):
    """No ``flow``, and the ``workspace`` auth-ok named (``default`` on an open
    gateway): the caller's own collections."""
    await client.set_collection("mine", name="Mine")
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(stack.url + "api/v1/socket") as ws:
            await ws.send_json({"type": "auth", "token": ""})
            assert (await ws.receive_json())["default_workspace"] == "default"
            await ws.send_json({"id": "c1", "service": "collection-management",
                                "workspace": "default",
                                "request": {"operation": "list-collections"}})
            frame = await ws.receive_json()
    assert frame["complete"] and {"collection": "mine", "name": "Mine", "description": "",
                                  "tags": []} in frame["response"]["collections"]


async def test_the_collection_commands(stack, client):
    async def tg(*argv: str) -> tuple[int, str, str]:
        return await tg_command(argv[0], "-u", stack.url, *argv[1:], timeout=30)

    await client.load_text("Words.", "w", user="cm6", collection="cli", flow=stack.flow)
    assert await tg("tg-set-collection", "cli", "-U", "cm6", "-n", "From the CLI", "-t",
                    "a", "-t", "b") == (0, "collection  name          description  tags\n"
                                           "cli         From the CLI               a, b\n",
                                        "")
    code, listed, _ = await tg("tg-list-collections", "-U", "cm6", "-t", "b")
    assert code == 0 and listed.splitlines()[1].split() == ["cli", "From", "the", "CLI",
                                                            "a,", "b"]
    assert await tg("tg-list-collections", "-U", "cm6", "-t", "zz") == (
        0, "no collections\n", "")
    code, _, err = await tg("tg-delete-collection", "cli", "-U", "cm6")  # no terminal
    assert code == 1 and "add -y" in err
    assert await tg("tg-delete-collection", "cli", "-U", "cm6", "-y") == (
        0, "collection 'cli' deleted; removed 1 documents, 0 chunks, 0 lexical, "
           "0 entities, 0 triples\n", "")
    assert await client.list_collections(user="cm6") == []
