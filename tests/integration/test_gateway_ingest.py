"""The gateway's ingestion rows (text-load, document-load, librarian) and query rows
(embeddings, triples, graph-embeddings, document-embeddings), and the client library's
methods for them, on a real broker in front of the real librarian and store owners.

The embeddings service is a stand-in (tests/support/ingest_stack.py): a text's vector
is a fixed pseudo-random unit vector seeded by the text, so a query for the same text
finds it with score 1. One stack serves the whole module, on a flow of its own.
"""
import base64
import hashlib

import aiohttp
import pytest
import pytest_asyncio

from tests.support.ingest_stack import DEADLINE, IngestStack, ask, vector_of
from tests.support.topic import Topic
from tests.support.waiting import eventually, signalled
from trustgraph.api import AsyncTrustGraph, TrustGraphError
from trustgraph.api.library import SINGLE_LOAD_BYTES
from trustgraph.schema import (
    LIBRARIAN_FLOW,
    Chunk,
    ChunkTriples,
    ChunkVector,
    DecodeWork,
    DocumentRef,
    DocumentRemoved,
    EntityVector,
    EntityVectors,
    Term,
    Triple,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

I, L = Term.iri, Term.literal  # noqa: E741 (the wire's term kinds "i", "l")


async def arrived(topic: Topic, *ids: str) -> dict:
    """The latest record on a watched stage topic for each document id (a new
    subscription also sees what earlier tests sent there)."""
    def all_there():
        latest = {r.document.id: r for r in topic.seen}
        return latest if set(ids) <= set(latest) else None
    return await signalled(topic.arrived, all_there, f"records of {', '.join(ids)}",
                           timeout=DEADLINE)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(broker, tmp_path_factory):
    stack = IngestStack(broker, tmp_path_factory.mktemp("ingest"))
    try:
        yield await stack.start()
    finally:
        await stack.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def client(stack):
    async with AsyncTrustGraph(stack.url) as client:
        yield client


@pytest_asyncio.fixture(loop_scope="module")
async def ws(stack):
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(stack.url + "api/v1/socket") as ws:
            yield ws


async def post(stack, service: str, body: dict, flow: str | None = None
               ) -> tuple[int, dict]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=DEADLINE)) as http:
        async with http.post(f"{stack.url}api/v1/flow/{flow or stack.flow}/service/{service}",
                             json=body) as response:
            return response.status, await response.json()


# --- text-load / document-load ----------------------------------------------------

async def test_a_load_is_answered_with_an_empty_object_and_its_work_follows(stack, ws):
    decode = await Topic.watch(stack.bus, "decode", stack.flow, DecodeWork)
    frame = await ask(ws, "text-load", {"id": "ws-doc", "title": "notes.md",
                                        "text": "# Notes\n\nGraphs and vectors."}, stack.flow)
    assert frame["response"] == {}
    status, body = await post(stack, "document-load", {
        "id": "rest-doc", "data": base64.b64encode(b"plain words").decode()})
    assert (status, body) == (200, {})
    work = await arrived(decode, "ws-doc", "rest-doc")
    assert work["ws-doc"].kind == "text/markdown" and work["rest-doc"].kind == "text/plain"


@pytest.mark.parametrize("service, request_, type_, words", [
    ("text-load", {"text": "x"}, "bad-request", "request.id: Field required"),
    ("document-load", {"id": "d"}, "bad-request", "request.data: Field required"),
    ("text-load", {"id": "d", "text": 5}, "bad-request", "request.text: Input should be"),
])
async def test_malformed_loads_are_refused_by_the_gateway(stack, ws, service, request_, type_,
                                                          words):
    frame = await ask(ws, service, request_, stack.flow)
    assert frame["error"]["type"] == type_ and frame["error"]["message"].startswith(words)
    status, body = await post(stack, service, request_)
    assert status == 400 and body["error"]["message"].startswith(words)


@pytest.mark.parametrize("request_, words", [
    ({"id": "d", "data": "not base64!"}, "data is not valid base64"),
    ({"id": "d", "data": base64.b64encode(b"hi").decode(), "kind": "image/png"},
     "cannot process documents of type 'image/png'"),
    ({"id": "d", "data": base64.b64encode(b"no header").decode(), "kind": "application/pdf"},
     "the content is not a PDF"),
])
async def test_loads_the_librarian_refuses_answer_its_error_and_nothing_else(stack, ws,
                                                                             request_, words):
    frame = await ask(ws, "document-load", request_, stack.flow)
    assert frame["response"]["error"]["type"] == "bad-request"
    assert words in frame["response"]["error"]["message"]
    assert set(frame["response"]) == {"error"}


async def test_client_loads_text_and_pdf_in_one_request(stack, client):
    decode = await Topic.watch(stack.bus, "decode", stack.flow, DecodeWork)
    await client.load_text("Some text.", "c-text", title="c.txt", user="ann",
                           collection="papers", flow=stack.flow)
    await client.load_document(b"%PDF-1.4\n...", "c-pdf", title="c.pdf", user="ann",
                               collection="papers", flow=stack.flow)
    work = await arrived(decode, "c-text", "c-pdf")
    assert work["c-pdf"].kind == "application/pdf"
    assert work["c-text"].document == DocumentRef(id="c-text", user="ann",
                                                  collection="papers", title="c.txt")


async def test_a_document_at_the_single_load_cap_fits_one_frame_and_message(stack, client):
    decode = await Topic.watch(stack.bus, "decode", stack.flow, DecodeWork)
    data = (b"0123456789abcde\n" * (3 * 1024 * 1024 // 16))
    assert len(data) == SINGLE_LOAD_BYTES  # 4 MiB of base64 in one document-load
    await client.load_document(data, "cap.txt", collection="cap", flow=stack.flow)
    assert (await arrived(decode, "cap.txt"))["cap.txt"].document.collection == "cap"
    assert (await client.get_document_metadata("cap.txt", collection="cap"))["size"] == len(data)


async def test_client_uploads_a_document_over_the_single_load_cap_in_parts(stack, client):
    decode = await Topic.watch(stack.bus, "decode", stack.flow, DecodeWork)
    text = b"".join(b"line %d of a long text document\n" % i for i in range(120_000))
    assert len(text) > 3 * 1024 * 1024
    await client.load_document(text, "big.txt", title="big.txt", collection="big",
                               flow=stack.flow)
    work = (await arrived(decode, "big.txt"))["big.txt"]
    assert work.document.collection == "big" and work.kind == "text/plain"
    stored = await client.get_document_metadata("big.txt", collection="big")
    assert stored["size"] == len(text)
    assert stored["sha256"] == hashlib.sha256(text).hexdigest()


# --- librarian ----------------------------------------------------------------------

async def test_library_operations_through_the_client(stack, client):
    removed = await Topic.watch(stack.bus, "document-removed", LIBRARIAN_FLOW, DocumentRemoved)
    decode = await Topic.watch(stack.bus, "decode", stack.flow, DecodeWork)
    scope = {"user": "lib", "collection": "ops"}
    added = await client.add_document(b"first", "a.txt", title="A", tags=["x", "y"], **scope)
    await client.add_document(b"# second", "b.md", comments="md", **scope)
    assert (added["id"], added["kind"], added["size"], added["tags"]) == (
        "a.txt", "text/plain", 5, ["x", "y"])
    listed = await client.list_documents(**scope)
    assert [d["id"] for d in listed] == ["a.txt", "b.md"]
    assert listed[1]["kind"] == "text/markdown" and listed[1]["comments"] == "md"
    assert await client.get_document_metadata("a.txt", **scope) == added
    assert await client.list_documents(user="lib", collection="other") == []

    processing = await client.add_processing("b.md", flow=stack.flow, **scope)
    assert processing["flow"] == stack.flow and processing["document_id"] == "b.md"
    assert (await arrived(decode, "b.md"))["b.md"].document.user == "lib"

    assert (await client.remove_document("a.txt", **scope))["id"] == "a.txt"
    assert (await arrived(removed, "a.txt"))["a.txt"].document.collection == "ops"
    with pytest.raises(TrustGraphError) as missing:
        await client.get_document_metadata("a.txt", **scope)
    assert missing.value.type == "not-found" and "'a.txt'" in missing.value.message


async def test_librarian_is_reached_whatever_flow_is_named(stack, ws):
    request = {"operation": "list-documents", "user": "nobody"}
    for flow in ("not-a-flow", stack.flow):
        frame = await ask(ws, "librarian", request, flow)
        assert frame["response"] == {"documents": [], "end_of_stream": True}
    status, body = await post(stack, "librarian", {"operation": "get-document-metadata",
                                                   "id": "nope"}, flow="elsewhere")
    assert status == 404 and body["error"]["type"] == "not-found"
    frame = await ask(ws, "librarian", {"operation": "shred"}, stack.flow)
    assert frame["error"]["type"] == "bad-request"
    assert frame["error"]["message"].startswith("request.operation: Input should be")


# --- embeddings ---------------------------------------------------------------------

async def test_embeddings_one_vector_per_text(stack, client, ws):
    assert await client.embeddings(["a", "b"], flow=stack.flow) == [vector_of("a"),
                                                                     vector_of("b")]
    assert await client.embeddings([], flow=stack.flow) == []
    legacy = await ask(ws, "embeddings", {"text": "a"}, stack.flow)
    assert legacy["response"]["vectors"] == [vector_of("a")]
    bad = await ask(ws, "embeddings", {"texts": "a"}, stack.flow)
    assert bad["error"]["message"].startswith("request.texts: Input should be a valid list")


# --- triples ------------------------------------------------------------------------

def t(s: str, p: str, o: Term) -> Triple:
    return Triple(s=I(f"http://ex/{s}"), p=I(f"http://ex/{p}"), o=o)


async def test_triples_pattern_queries_per_collection(stack, client, ws):
    doc = DocumentRef(id="tdoc", user="tq", collection="graph")
    triples = [t("alice", "knows", I("http://ex/bob")), t("alice", "name", L("Alice")),
               t("bob", "name", L("Bob"))]
    await stack.emit("triples", ChunkTriples(document=doc, chunk_id="tdoc/c0",
                                             triples=triples))
    scope = {"user": "tq", "collection": "graph", "flow": stack.flow}
    found = await eventually(lambda: client.triples(**scope), "the triples to be stored")
    assert sorted(Triple.model_validate(x).model_dump_json() for x in found) == sorted(
        x.model_dump_json() for x in triples)
    assert await client.triples("http://ex/alice", "http://ex/name", **scope) == [
        triples[1].model_dump(exclude_none=True)]
    assert len(await client.triples(o={"t": "l", "v": "Bob"}, **scope)) == 1
    assert len(await client.triples(limit=2, **scope)) == 2
    assert await client.triples(user="tq", collection="other", flow=stack.flow) == []

    literal = await ask(ws, "triples", {"s": {"t": "l", "v": "x"}, "user": "tq"}, stack.flow)
    assert literal["response"]["error"]["type"] == "bad-request"
    assert "'s' must be an IRI term" in literal["response"]["error"]["message"]
    status, body = await post(stack, "triples", {"limit": 0})
    assert status == 400 and body["error"]["message"].startswith("request.limit: Input should")


# --- document-embeddings and graph-embeddings -------------------------------------------

async def test_document_embeddings_nearest_chunks_per_user(stack, client, ws):
    texts = {"c0": "graphs of entities", "c1": "vectors in shards", "c2": "a third chunk"}
    doc = DocumentRef(id="vdoc", user="vq", collection="docs", title="Vectors")
    for i, (key, text) in enumerate(texts.items()):
        await stack.emit("chunk-vectors", ChunkVector(
            chunk=Chunk(document=doc, id=f"vdoc/{key}", index=i, text=text),
            vector=vector_of(text)))
    scope = {"user": "vq", "collection": "docs", "flow": stack.flow}

    async def stored():
        found = await client.document_embeddings(vector_of("vectors in shards"), **scope)
        return found if len(found) == 3 else None

    best, *rest = await eventually(stored, "three chunk vectors")
    assert (best["chunk_id"], best["text"], best["document_id"], best["title"]) == (
        "vdoc/c1", "vectors in shards", "vdoc", "Vectors")
    assert best["score"] == pytest.approx(1.0, abs=1e-4)
    assert best["score"] > rest[0]["score"]
    assert await client.document_embeddings(vector_of("x"), user="someone-else",
                                            flow=stack.flow) == []
    for request, words in (({"vector": []}, "request.vector: List should have at least 1"),
                           ({"vector": [1.0], "limit": 5000}, "request.limit: Input should")):
        frame = await ask(ws, "document-embeddings", request, stack.flow)
        assert frame["error"]["message"].startswith(words)


async def test_graph_embeddings_nearest_entities(stack, client):
    doc = DocumentRef(id="gdoc", user="gq", collection="kg")
    await stack.emit("entity-vectors", EntityVectors(document=doc, entities=[
        EntityVector(entity=I(f"http://ex/{name}"), label=name, vector=vector_of(name))
        for name in ("Alice", "Bob")]))

    async def stored():
        found = await client.graph_embeddings(vector_of("Bob"), user="gq", collection="kg",
                                              flow=stack.flow)
        return found if len(found) == 2 else None

    best, other = await eventually(stored, "two entity vectors")
    assert best["entity"] == {"t": "i", "i": "http://ex/Bob"} and best["label"] == "Bob"
    assert best["score"] == pytest.approx(1.0, abs=1e-4)
    assert best["score"] > other["score"]


# --- the service table ----------------------------------------------------------------

async def test_openapi_describes_every_ingestion_row(stack):
    async with aiohttp.ClientSession() as http:
        async with http.get(stack.url + "api/v1/openapi.json") as response:
            paths = (await response.json())["paths"]
    for name in ("text-load", "document-load", "librarian", "embeddings", "triples",
                 "graph-embeddings", "document-embeddings", "knowledge-load"):
        assert f"/api/v1/flow/{{flow}}/service/{name}" in paths
    flow = paths["/api/v1/flow/{flow}/service/librarian"]["post"]["parameters"][0]
    assert "enum" not in flow["schema"]
