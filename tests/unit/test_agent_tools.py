"""Tools as config data: which are offered, how a bad value is left out, and what
each kind calls with the request's scope and arguments."""
import pytest

from trustgraph.agent.tool_calls import BadArguments, ToolFailed, question_of, run_tool
from trustgraph.agent.toolbox import DEFAULT_TOOLS, Toolbox, described
from trustgraph.base import ServiceError
from trustgraph.base.requester import Calls
from trustgraph.schema import (
    AgentRequest,
    Error,
    PromptResponse,
    RagResponse,
    TextCompletionResponse,
    Usage,
    encode,
)
from trustgraph.schema.tool import ToolDefinition

REQUEST = AgentRequest(question="q", user="ann", collection="notes")


def tool(**fields) -> dict:
    return {"description": "d", "kind": "text-completion", **fields}


def test_groups_choose_the_tools_and_bad_values_are_left_out():
    box = Toolbox({"a": tool(name="alpha", group=["x"]), "b": tool(name="beta", group=["y"]),
                   "c": tool(name="gamma"), "bad": {"name": "no kind"}})
    assert list(box.offered(None)) == ["alpha", "beta", "gamma"]
    assert list(box.offered(["y", "x"])) == ["alpha", "beta"]
    assert box.offered(["z"]) == {}
    assert "bad" not in box.tools
    assert {t.name for t in Toolbox().tools.values()} == {"knowledge-query", "document-query"}
    [shown] = described({"knowledge-query": DEFAULT_TOOLS["knowledge"]})
    assert (shown["name"], shown["arguments"][0]["name"]) == ("knowledge-query", "question")


@pytest.mark.parametrize("arguments, question", [
    ({"question": "a?"}, "a?"), ({"query": "b?"}, "b?"), ({"text": "c?", "n": 1}, "c?")])
def test_question_of(arguments, question):
    assert question_of(arguments) == question


@pytest.mark.parametrize("arguments", [{}, {"a": "x", "b": "y"}, {"question": "  "}])
def test_a_question_tool_without_one_question(arguments):
    with pytest.raises(BadArguments, match="question"):
        question_of(arguments)


class Service:
    def __init__(self, answer):
        self.answer, self.requests = answer, []

    async def call(self, request, model):
        self.requests.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    async def frames(self, request, request_id=None):
        """A RAG service's stream: metadata, the answer in two pieces, the end."""
        answer = await self.call(request, RagResponse)
        records = [RagResponse(message_type="metadata", sources=[])]
        records += [RagResponse(message_type="chunk", chunk=piece)
                    for piece in (answer.response[:2], answer.response[2:])]
        records.append(RagResponse(message_type="chunk", chunk="", end_of_stream=True,
                                   in_token=answer.in_token, out_token=answer.out_token))
        yield [(encode(record), record.end_of_stream) for record in records]


class PromptService(Calls):
    """A prompt requester answering every request with one JSON object."""

    def __init__(self):
        self.requests = []

    async def frames(self, request, request_id=None):
        self.requests.append(request)
        yield [(encode(PromptResponse(object='{"sum": 3}', end_of_stream=True, in_token=4,
                                      out_token=2, model="m")), True)]


class Clients:
    def __init__(self, **services):
        self.services = services

    async def get(self, name):
        return self.services[name]


async def test_rag_tools_ask_in_the_users_collection_and_count_tokens():
    rag = Service(RagResponse(response="found", end_of_stream=True, in_token=5, out_token=1,
                              model="m"))
    usage = Usage()
    definition = ToolDefinition(**tool(name="docs", kind="document-query"))
    answer = await run_tool(definition, {"question": "where?"}, REQUEST,
                            Clients(**{"document-rag": rag}), usage, 1.0)
    [asked] = rag.requests
    assert (answer, asked.query, asked.user, asked.collection) == ("found", "where?", "ann",
                                                                   "notes")
    assert asked.streaming
    assert (usage.in_token, usage.out_token) == (5, 1)


async def test_prompt_and_text_completion_tools():
    prompts = PromptService()
    definition = ToolDefinition(**tool(name="sum", kind="prompt", template="adder"))
    usage = Usage()
    assert await run_tool(definition, {"a": 1, "b": 2}, REQUEST, Clients(prompt=prompts),
                          usage, 1.0) == '{"sum": 3}'
    assert (prompts.requests[0].id, prompts.requests[0].variables) == ("adder",
                                                                       {"a": 1, "b": 2})
    assert (usage.in_token, usage.out_token) == (4, 2)
    llm = Service(TextCompletionResponse(response="42", end_of_stream=True, in_token=1,
                                         out_token=1))
    assert await run_tool(ToolDefinition(**tool(name="llm")), {"question": "6*7?"}, REQUEST,
                          Clients(**{"text-completion": llm}), usage, 1.0) == "42"
    assert llm.requests[0].prompt == "6*7?"


async def test_a_service_error_is_a_tool_failure():
    failing = Service(ServiceError(Error(type="graph-rag-error", message="store down")))
    with pytest.raises(ToolFailed, match="graph-rag-error: store down"):
        await run_tool(ToolDefinition(**tool(name="kg", kind="knowledge-query")),
                       {"question": "q"}, REQUEST, Clients(**{"graph-rag": failing}),
                       Usage(), 1.0)


async def test_an_unreachable_mcp_server_is_a_tool_failure():
    definition = ToolDefinition(**tool(name="add", kind="mcp-tool",
                                       url="http://127.0.0.1:9/mcp"))
    with pytest.raises(ToolFailed, match="MCP server http://127.0.0.1:9/mcp"):
        await run_tool(definition, {"a": 1}, REQUEST, Clients(), Usage(), 2.0)
