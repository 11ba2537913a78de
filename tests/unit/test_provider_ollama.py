"""What the provider contract does not cover for Ollama: the request it sends,
OLLAMA_HOST forms, error lines and statuses, selection by TG_LLM."""
import pytest

from tests.support.ollama_server import OllamaServer, expected_text
from tests.support.scripted_llm import answered
from trustgraph.model.text_completion.choice import chosen_provider
from trustgraph.model.text_completion.ollama import provider as ollama_provider
from trustgraph.model.text_completion.provider import LlmError
from trustgraph.model.text_completion.retry import Retrying
from trustgraph.model.text_completion.service import spec_for


@pytest.fixture
async def server():
    server = await OllamaServer().start()
    yield server
    await server.stop()


@pytest.fixture
async def ollama():
    made = []

    def ollama(host: str, retries: int = 0, **settings) -> Retrying:
        made.append(ollama_provider.make(ollama_provider.Settings(ollama_host=host, **settings)))
        return Retrying(made[-1], retries, base_delay=0.01)

    yield ollama
    for provider in made:
        await provider.aclose()


async def text_of(stream) -> str:
    return "".join([piece async for piece in stream if isinstance(piece, str)])


async def test_request_carries_model_messages_and_options(server, ollama):
    provider = ollama(server.base_url, tg_llm_model="llama-test", tg_llm_max_tokens=55,
                      tg_llm_temperature=0.3)
    assert await text_of(answered(provider, "Be terse.", "[tokens=2]")) == expected_text(2)
    assert server.last_body == {
        "model": "llama-test", "stream": True,
        "messages": [{"role": "system", "content": "Be terse."},
                     {"role": "user", "content": "[tokens=2]"}],
        "options": {"temperature": 0.3, "num_predict": 55}}


async def test_host_without_scheme_is_http(server, ollama):
    assert await text_of(answered(ollama(f"127.0.0.1:{server.port}"), "", "hi")) == expected_text(5)


async def test_error_line_before_any_text_is_an_llm_error_with_its_message(server, ollama):
    with pytest.raises(LlmError, match="Ollama stream error: scripted failure"):
        await text_of(answered(ollama(server.base_url, retries=2), "", "[fail_after=0]"))
    assert server.stats.requests == 1


async def test_busy_server_is_retried(server, ollama):
    busy = ollama(server.base_url, retries=2)
    text = await text_of(answered(busy, "", "[status=503 fail_times=1]"))
    assert text == expected_text(5) and server.stats.requests == 2


async def test_status_error_names_the_server_and_its_message(server, ollama):
    with pytest.raises(LlmError) as error:
        await text_of(answered(ollama(server.base_url), "", "[status=404]"))
    assert f"{server.base_url}/api/chat answered 404: scripted 404" in error.value.message


async def test_unreachable_server_is_an_llm_error(ollama):
    with pytest.raises(LlmError, match="cannot reach Ollama"):
        await text_of(answered(ollama("http://127.0.0.1:9"), "", "hi"))


def test_tg_llm_selects_ollama(monkeypatch):
    monkeypatch.setenv("TG_LLM", "ollama")
    assert chosen_provider([]) == "ollama"
    spec = spec_for("ollama")
    assert spec.name == "text-completion-ollama"
