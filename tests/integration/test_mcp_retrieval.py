"""The MCP server's retrieval tools on real data, driven by the official ``mcp`` SDK's
client over streamable HTTP and through ``tg-mcp-stdio``: ``search`` (passages with
their citations), ``graph_neighbourhood`` (an entity's triples) and ``ask`` (with
the real document-rag's progress while it retrieves). Behind the gateway, the
processors of test_document_rag_bus.py (tests/support/rag_processors.py): the real
embedding model, Qdrant Edge, the SQLite triple store, document-rag and graph-rag,
and a local OpenAI-format LLM.
"""
import asyncio

import pytest
import pytest_asyncio
from mcp.client.client import Client

from tests.integration.test_graph_rag_bus import load_graph
from tests.support.mcp_bridge import stdio
from tests.support.openai_server import expected_text
from tests.support.rag_processors import rag_processors
from trustgraph.extract.vocabulary import entity_iri
from trustgraph.gateway.app import Gateway, GatewaySettings
from trustgraph.pubsub.embedded import free_port

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEADLINE = 30.0

PASSAGES = {
    ("acme-history", "A history of Acme"): [
        "Acme Rockets was founded in 1952 by Ada Quill in Tucson, Arizona.",
        "In 1970 Acme Rockets moved its factory to Houston."],
    ("acme-catalogue", "The Acme catalogue"): [
        "The catalogue lists anvils, giant magnets and portable holes."],
}
GRAPH = {"acme-history": [[("Acme Rockets", "was founded by", "Ada Quill"),
                           ("Acme Rockets", "was founded in", '"1952"')]],
         "acme-catalogue": [[("Roadrunner engine", "is made by", "Acme Rockets")]]}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def url(broker, module_data_dir):
    """The gateway's URL, in front of the processors with the collection loaded."""
    async with rag_processors(broker, module_data_dir) as rag:
        await asyncio.gather(rag.load_chunks("trustgraph", "acme", PASSAGES),
                             load_graph(rag, "trustgraph", "acme", GRAPH))
        gateway = Gateway(GatewaySettings(
            pulsar_url=broker.url, tg_gateway_host="127.0.0.1", tg_gateway_port=free_port(),
            tg_flows=[rag.flow], tg_request_timeout=30))
        try:
            yield await gateway.start()
        finally:
            await gateway.stop()


@pytest.fixture
def server(url, via):
    """Over HTTP, or through tg-mcp-stdio (a process per test: where the bridge matters)."""
    return url + "mcp" if via == "http" else stdio(url)


@pytest.mark.parametrize("via", ["http", "stdio"])
async def test_search_finds_passages_with_their_citations(server):
    async with Client(server, read_timeout_seconds=DEADLINE) as client:
        result = await client.call_tool("search", {"query": "Who founded Acme Rockets?",
                                                   "collection": "acme", "limit": 2})
    assert not result.is_error
    nearest, second = result.structured_content["passages"]
    assert (nearest["citation"], nearest["document_id"], nearest["title"],
            nearest["chunk_id"]) == (1, "acme-history", "A history of Acme", "acme-history/c0")
    assert nearest["text"] == PASSAGES[("acme-history", "A history of Acme")][0]
    assert second["citation"] == 2 and nearest["score"] >= second["score"]
    assert result.content[0].text.startswith(f"[1] A history of Acme (score "
                                             f"{nearest['score']:.2f})\n{nearest['text']}")


@pytest.mark.parametrize("via", ["http"])
async def test_graph_neighbourhood_by_name_and_by_iri(server):
    async with Client(server, read_timeout_seconds=DEADLINE) as client:
        by_name = await client.call_tool("graph_neighbourhood", {
            "entity": "Acme Rockets", "collection": "acme"})
        by_iri = await client.call_tool("graph_neighbourhood", {
            "entity": entity_iri("Acme Rockets"), "collection": "acme"})
        nothing = await client.call_tool("graph_neighbourhood", {
            "entity": "Acme Rockets", "collection": "empty"})
    entity = by_name.structured_content["entity"]
    assert (entity["iri"], entity["label"]) == (entity_iri("Acme Rockets"), "Acme Rockets")
    statements = {(t["subject"], t["predicate"], t["object"]): t["document_id"]
                  for t in by_name.structured_content["triples"]}
    assert statements[("Acme Rockets", "was founded by", "Ada Quill")] == "acme-history"
    assert statements[("Acme Rockets", "was founded in", "1952")] == "acme-history"
    assert statements[("Roadrunner engine", "is made by", "Acme Rockets")] == "acme-catalogue"
    assert by_iri.structured_content["triples"] == by_name.structured_content["triples"]
    assert nothing.is_error and nothing.content[0].text.startswith("not-found: no entity")


@pytest.mark.parametrize("via", ["http", "stdio"])
async def test_ask_tells_what_retrieval_does_then_the_answer(server):
    told: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        told.append(message or "")

    async with Client(server, read_timeout_seconds=DEADLINE) as client:
        result = await client.call_tool("ask", {"question": "Who founded Acme Rockets?",
                                                "collection": "acme"},
                                        progress_callback=progress)
    assert result.structured_content["answer"] == expected_text(12)
    assert result.structured_content["sources"][0]["document_id"] == "acme-history"
    assert told[0] == "searching the documents for 1 question"
    assert "".join(told[1:]) == expected_text(12)
