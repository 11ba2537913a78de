"""What the provider contract does not cover for Claude (Anthropic API and Vertex AI):
the request it sends, overload signalled inside a 200 stream, error messages."""
import pytest

from tests.support.anthropic_server import AnthropicServer, VertexClaudeServer, expected_text
from tests.support.scripted_llm import answered
from trustgraph.base import Context, Items
from trustgraph.model.text_completion.anthropic import provider as anthropic_provider
from trustgraph.model.text_completion.provider import LlmError, Options, Overloaded
from trustgraph.model.text_completion.retry import Retrying
from trustgraph.model.text_completion.service import completion_handler
from trustgraph.model.text_completion.vertexai_claude import provider as vertex_provider
from trustgraph.schema import TextCompletionRequest

SETTINGS = Options()  # a request asking nothing of its own: the settings apply


@pytest.fixture
async def server():
    server = await AnthropicServer().start()
    yield server
    await server.stop()


@pytest.fixture
async def vertex():
    server = await VertexClaudeServer().start()
    yield server
    await server.stop()


def claude(server: AnthropicServer, retries: int = 0, **settings) -> Retrying:
    provider = anthropic_provider.make(anthropic_provider.Settings(
        anthropic_base_url=server.base_url, anthropic_api_key="test-key", **settings))
    return Retrying(provider, retries, base_delay=0.01)


def claude_on_vertex(server: VertexClaudeServer, retries: int = 0, **settings) -> Retrying:
    provider = vertex_provider.make(vertex_provider.Settings(
        anthropic_vertex_base_url=server.base_url, google_cloud_project=server.project,
        google_cloud_location=server.region, **settings))
    return Retrying(provider, retries, base_delay=0.01)


async def text_of(stream) -> str:
    return "".join([piece async for piece in stream if isinstance(piece, str)])


async def test_request_carries_system_model_and_max_tokens(server):
    provider = claude(server, tg_llm_model="claude-test", tg_llm_max_tokens=77)
    assert await text_of(answered(provider, "Be terse.", "[tokens=2]")) == expected_text(2)
    body = server.last_body
    assert (body["model"], body["max_tokens"], body["system"]) == ("claude-test", 77, "Be terse.")
    assert body["messages"] == [{"role": "user", "content": "[tokens=2]"}]
    assert body["stream"] is True and "temperature" not in body
    assert "test-key" in (server.last_headers.get("X-Api-Key", "")
                          + server.last_headers.get("Authorization", ""))


async def test_empty_system_prompt_is_left_out(server):
    await text_of(answered(claude(server), "", "hi"))
    assert "system" not in server.last_body


async def test_overloaded_error_event_before_any_text_is_retried(server):
    server.stream_error_type = "overloaded_error"
    with pytest.raises(LlmError, match="overloaded"):
        await text_of(answered(claude(server, retries=2), "", "[fail_after=0]"))
    assert server.stats.requests == 3


async def test_overload_after_the_first_text_is_an_llm_error_and_not_retried(server):
    # The text-completion service reads the rest of the answer from the provider's own
    # generator: an overload there ends the answer with an LlmError, the text kept.
    server.stream_error_type = "overloaded_error"
    answer = Items(completion_handler(claude(server, retries=2))(
        TextCompletionRequest(prompt="[tokens=5 fail_after=2]", streaming=True),
        Context("t", "default", None)))
    texts = []
    with pytest.raises(LlmError, match="overloaded mid-answer") as error:
        async for delta in answer:
            texts.append(delta.text)
    assert not isinstance(error.value, Overloaded)
    assert "".join(texts) == expected_text(2) and server.stats.requests == 1


async def test_529_is_retried(server):
    text = await text_of(answered(claude(server, retries=2), "", "[status=529 fail_times=1]"))
    assert text == expected_text(5) and server.stats.requests == 2


async def test_error_names_the_server_status_and_its_message(server):
    with pytest.raises(LlmError) as error:
        await text_of(answered(claude(server), "", "[status=400]"))
    assert "Claude" in error.value.message and server.base_url in error.value.message
    assert "400" in error.value.message and "scripted 400" in error.value.message


async def test_unreachable_server_is_an_llm_error():
    provider = anthropic_provider.make(anthropic_provider.Settings(
        anthropic_base_url="http://127.0.0.1:9", anthropic_api_key="k"))
    with pytest.raises(LlmError, match="cannot reach Claude"):
        await text_of(provider.stream("", "hi", SETTINGS))


async def test_vertex_puts_project_region_and_model_in_the_path(vertex):
    provider = claude_on_vertex(vertex, google_oauth_access_token=vertex.token,
                                tg_llm_model="claude-test@2026")
    assert await text_of(answered(provider, "sys", "[tokens=3]")) == expected_text(3)
    assert vertex.last_path == {"project": vertex.project, "region": vertex.region,
                                "model": "claude-test@2026", "method": "streamRawPredict"}
    assert "model" not in vertex.last_body and vertex.last_body["anthropic_version"]
    assert vertex.last_body["system"] == "sys"


async def test_vertex_quota_error_in_google_format_is_retried(vertex):
    provider = claude_on_vertex(vertex, retries=1, google_oauth_access_token=vertex.token)
    with pytest.raises(LlmError, match="overloaded.*scripted 429"):
        await text_of(answered(provider, "", "[status=429]"))
    assert vertex.stats.requests == 2


async def test_vertex_rejected_token_is_an_llm_error(vertex):
    provider = claude_on_vertex(vertex, retries=3, google_oauth_access_token="wrong")
    with pytest.raises(LlmError, match="401: bad access token"):
        await text_of(answered(provider, "", "hi"))
