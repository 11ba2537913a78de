"""TrustGraph's own published client (``trustgraph.api.Api``) and CLI, 2.11.1 from PyPI
in a venv of their own (tests/support/trustgraph_venv.py), against ``tg-start``'s
default stack, as an operator switching from TrustGraph uses them: collections, config
items, prompts, tools, the library, the graph and the RAG services, and flows.

TrustGraph's commands print ``Exception: ...`` and still exit 0 when they fail, so
every check reads what a command printed. The LLM is the local OpenAI-format server
(``[tokens=N]`` in a question steers its answer).
"""
import asyncio
import json

import pytest
import pytest_asyncio

from tests.support.openai_server import expected_text
from tests.support.stack import Stack, openai_server_thread
from tests.support.waiting import eventually
from trustgraph.api import AsyncTrustGraph

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEADLINE = 90.0  # for the pipeline to settle
COLLECTION = "tgc"
TEXT = ("Ada Lovelace wrote the first program for the Analytical Engine, the machine "
        "Charles Babbage designed.")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack():
    with openai_server_thread() as llm:
        async with Stack(env={"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "test",
                              "TG_REQUEST_TIMEOUT": "20"}, startup_timeout=120) as stack:
            yield stack


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(stack):
    async with AsyncTrustGraph(stack.gateway_url) as client:
        yield client


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def loaded(client):
    """A text loaded (by our client) into ``COLLECTION`` and settled in the stores."""
    await client.load_text(TEXT, "ada.txt", title="Ada", collection=COLLECTION)

    async def settled() -> bool:
        [status] = await client.load_status(["ada.txt"], collection=COLLECTION)
        return status["state"] == "done" and bool(
            await client.triples(limit=5, collection=COLLECTION))

    await eventually(settled, "ada.txt to be stored", timeout=DEADLINE)


async def api(trustgraph, stack, script: str) -> dict:
    """``script`` run with TrustGraph's client as ``api`` (``Api(url)``); what it
    printed, as JSON."""
    code, out, err = await asyncio.to_thread(trustgraph.python, (
        "import json, sys\nfrom trustgraph.api import Api, ConfigKey, ConfigValue\n"
        "api = Api(sys.argv[1])\n" + script), stack.gateway_url)
    assert code == 0, err
    return json.loads(out)


async def tg(trustgraph, stack, command: str, *args: str) -> str:
    """TrustGraph's command ``command``, run as a user runs it: what it printed, which
    must not be its ``Exception:`` line."""
    code, out, err = await asyncio.to_thread(trustgraph.command, command, "-u",
                                             stack.gateway_url, *args)
    assert code == 0 and "Exception" not in out, (command, out, err)
    return out


# --- TrustGraph's client ----------------------------------------------------------------

async def test_collections_through_trustgraphs_client(trustgraph, stack, client, loaded):
    got = await api(trustgraph, stack, f"""
c = api.collection()
out = {{"before": [vars(x) for x in c.list_collections()]}}
out["set"] = vars(c.update_collection("{COLLECTION}", name="Lovelace", description="notes",
                                      tags=["history"]))
out["filtered"] = [x.collection for x in c.list_collections(tag_filter=["history"])]
out["other"] = [x.collection for x in c.list_collections(tag_filter=["nope"])]
c.update_collection("scratch", name="Scratch")
out["deleted"] = c.delete_collection("scratch")
out["after"] = [x.collection for x in c.list_collections()]
print(json.dumps(out))""")
    # The load made the collection, unnamed.
    assert {"collection": COLLECTION, "name": "", "description": "", "tags": []} in \
        got["before"]
    assert got["set"] == {"collection": COLLECTION, "name": "Lovelace",
                          "description": "notes", "tags": ["history"]}
    assert (got["filtered"], got["other"]) == ([COLLECTION], [])
    assert got["deleted"] == {} and "scratch" not in got["after"]
    assert (await client.list_collections(["history"]))[0]["name"] == "Lovelace"


async def test_config_through_trustgraphs_client(trustgraph, stack, client):
    """TrustGraph's client puts and reads values as JSON text; ours reads the JSON."""
    got = await api(trustgraph, stack, """
cfg = api.config()
cfg.put([ConfigValue(type="tg-compat", key="model", value=json.dumps({"name": "m", "n": 2})),
         ConfigValue(type="tg-compat", key="plain", value="gpt-4")])
out = {"get": [v.value for v in cfg.get([ConfigKey(type="tg-compat", key="model")])],
       "missing": cfg.get([ConfigKey(type="tg-compat", key="nope")]),
       "list": cfg.list("tg-compat"),
       "values": {v.key: v.value for v in cfg.get_values("tg-compat")}}
config, version = cfg.all()
out["all"] = config["tg-compat"]
out["prompt"] = json.loads(config["prompt"]["template.kg-prompt"])["prompt"][:20]
cfg.delete([ConfigKey(type="tg-compat", key="plain")])
out["after"] = cfg.list("tg-compat")
print(json.dumps(out))""")
    assert json.loads(got["get"][0]) == {"name": "m", "n": 2}
    assert got["missing"] == [] and got["list"] == ["model", "plain"]
    assert got["values"]["plain"] == '"gpt-4"' and got["all"] == got["values"]
    assert got["prompt"] and got["after"] == ["model"]
    assert await client.config_item("tg-compat", "model") == {"name": "m", "n": 2}


async def test_graph_and_document_rag_through_trustgraphs_client(trustgraph, stack, loaded):
    got = await api(trustgraph, stack, f"""
flow = api.flow().id("default")
graph = flow.graph_rag(query="Who wrote the first program? [tokens=7]",
                       collection="{COLLECTION}")
document = flow.document_rag(query="Who designed the engine? [tokens=5]",
                             collection="{COLLECTION}")
print(json.dumps({{"graph": graph.text, "sources": len(graph.sources),
                   "document": document.text}}))""")
    assert (got["graph"], got["document"]) == (expected_text(7), expected_text(5))
    assert got["sources"] > 0


# --- TrustGraph's commands ----------------------------------------------------------------

async def test_trustgraphs_config_commands(trustgraph, stack, client):
    shown = await tg(trustgraph, stack, "tg-show-config")
    assert shown.startswith("Version: ") and '"template.kg-prompt"' in shown
    keys = (await tg(trustgraph, stack, "tg-list-config-items", "--type", "prompt")).split()
    assert "system" in keys and "template.document-prompt" in keys
    assert await tg(trustgraph, stack, "tg-put-config-item", "--type", "tg-cli", "--key",
                    "limits", "--value", '{"max": 3}') == \
        "Configuration item set: tg-cli/limits\n"
    assert await client.config_item("tg-cli", "limits") == {"max": 3}
    assert json.loads(await tg(trustgraph, stack, "tg-get-config-item", "--type", "tg-cli",
                               "--key", "limits")) == {"max": 3}
    assert await tg(trustgraph, stack, "tg-delete-config-item", "--type", "tg-cli", "--key",
                    "limits") == "Configuration item deleted: tg-cli/limits\n"
    assert await client.config_keys("tg-cli") == []


async def test_trustgraphs_prompt_commands(trustgraph, stack, client):
    listed = await tg(trustgraph, stack, "tg-show-prompts")
    assert "System prompt:" in listed and "\nkg-prompt:\n" in listed
    assert await tg(trustgraph, stack, "tg-set-prompt", "--id", "greet", "--prompt",
                    "Greet {{ name }} [tokens=3]") == "Prompt set.\n"
    assert await tg(trustgraph, stack, "tg-set-prompt", "--system",
                    "You are terse.") == "System prompt set.\n"
    # The prompt service uses them from its next request on.
    answer = await eventually(lambda: client.prompt("greet", {"name": "Ada"}),
                              "the new template", accept=lambda text: text == expected_text(3))
    assert answer == expected_text(3)
    assert "\ngreet:\n" in await tg(trustgraph, stack, "tg-show-prompts")


async def test_trustgraphs_tool_commands(trustgraph, stack, client):
    assert "knowledge-query" in await tg(trustgraph, stack, "tg-show-tools")
    assert await tg(trustgraph, stack, "tg-set-tool", "--id", "lookup", "--name", "lookup",
                    "--type", "knowledge-query", "--description", "Ask the graph.",
                    "--argument", "question:string:The question") == "Tool set.\n"
    stored = (await client.config_values("tool"))["lookup"]
    assert (stored["type"], stored["arguments"][0]["name"]) == ("knowledge-query",
                                                                "question")
    assert "Ask the graph." in await tg(trustgraph, stack, "tg-show-tools")


async def test_trustgraphs_collection_commands(trustgraph, stack, client):
    await client.load_text("Grace Hopper wrote a compiler.", "grace.txt",
                           collection="doomed")
    assert "doomed" in await tg(trustgraph, stack, "tg-list-collections")
    assert "Collection 'doomed' set successfully." in await tg(
        trustgraph, stack, "tg-set-collection", "doomed", "-n", "Doomed", "-d", "to go",
        "-t", "tmp")
    assert "Doomed" in await tg(trustgraph, stack, "tg-list-collections", "-t", "tmp")
    assert await tg(trustgraph, stack, "tg-delete-collection", "doomed", "-y") == \
        "Collection 'doomed' deleted successfully.\n"
    assert await client.list_documents(collection="doomed") == []
    assert "doomed" not in [c["collection"] for c in await client.list_collections()]


async def test_trustgraphs_library_commands(trustgraph, stack, client, tmp_path):
    """Into the default collection (TrustGraph's library has none)."""
    path = tmp_path / "hopper.txt"
    path.write_text("Grace Hopper wrote a compiler.")
    assert await tg(trustgraph, stack, "tg-add-library-document", "--id", "hopper",
                    "--name", "Hopper", "-k", "text/plain", "--tags", "people",
                    str(path)) == f"{path}: Loaded successfully.\n"
    [document] = [d for d in await client.list_documents() if d["id"] == "hopper"]
    assert (document["kind"], document["size"]) == ("text/plain", path.stat().st_size)
    listed = await tg(trustgraph, stack, "tg-show-library-documents")
    assert "| id    | hopper" in listed and "text/plain" in listed


async def test_trustgraphs_graph_and_rag_commands(trustgraph, stack, loaded):
    graph = await tg(trustgraph, stack, "tg-show-graph", "-C", COLLECTION)
    assert "Lovelace" in graph or "lovelace" in graph
    answer = await tg(trustgraph, stack, "tg-invoke-graph-rag", "-C", COLLECTION, "-q",
                      "Who wrote the first program? [tokens=4]")
    assert expected_text(4) in answer
    answer = await tg(trustgraph, stack, "tg-invoke-document-rag", "-C", COLLECTION, "-q",
                      "Who designed it? [tokens=6]")
    assert expected_text(6) in answer
    assert expected_text(2) in await tg(trustgraph, stack, "tg-invoke-llm", "Be brief.",
                                        "Hello [tokens=2]")


# --- flows ---------------------------------------------------------------------------

async def test_flows_through_trustgraphs_client(trustgraph, stack, loaded):
    got = await api(trustgraph, stack, f"""
flows = api.flow()
out = {{"blueprints": flows.list_blueprints(), "before": flows.list()}}
blueprint = out["blueprints"][0]
flows.start(blueprint, "tg-compat", "started by TrustGraph's client",
            parameters={{"temperature": "0.2", "doc-limit": "4"}})
out["during"] = flows.list()
out["got"] = flows.get("tg-compat")
flow = flows.id("tg-compat")
out["answer"] = flow.graph_rag(query="Who wrote it? [tokens=3]", collection="{COLLECTION}").text
out["documents"] = flow.document_rag(query="Who wrote it? [tokens=4]",
                                     collection="{COLLECTION}").text
flows.stop("tg-compat")
out["after"] = flows.list()
print(json.dumps(out))""")
    assert got["blueprints"] and "default" in got["before"]
    assert "tg-compat" in got["during"] and "tg-compat" not in got["after"]
    assert got["got"]["description"] == "started by TrustGraph's client"
    assert got["got"]["parameters"]["temperature"] == 0.2  # typed as its parameter type
    assert got["got"]["parameters"]["doc-limit"] == 4
    assert got["answer"] == expected_text(3)
    assert got["documents"] == expected_text(4)


async def test_trustgraphs_flow_commands(trustgraph, stack):
    blueprints = await tg(trustgraph, stack, "tg-show-flow-blueprints")
    assert blueprints.strip()
    assert "default" in await tg(trustgraph, stack, "tg-show-flows")
    blueprint = await api(trustgraph, stack, "print(json.dumps(api.flow().list_blueprints()))")
    await tg(trustgraph, stack, "tg-start-flow", "-n", blueprint[0], "-i", "tg-cli",
             "-d", "started by TrustGraph's command")
    assert "tg-cli" in await tg(trustgraph, stack, "tg-show-flows")
    await tg(trustgraph, stack, "tg-stop-flow", "-i", "tg-cli")
    assert "tg-cli" not in await tg(trustgraph, stack, "tg-show-flows")
