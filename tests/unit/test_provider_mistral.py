"""What the provider contract does not cover for Mistral: the request it sends (no
``stream_options``, which Mistral rejects), reasoning chunks, error messages, SDK
retries off."""
import asyncio
import socket
import time

import pytest

from tests.support.mistral_server import MistralServer
from tests.support.scripted_llm import PROMPT_TOKENS, expected_text
from tests.support.scripted_llm import collect_text as run
from trustgraph.model.text_completion.mistral import provider as mistral_provider
from trustgraph.model.text_completion.provider import LlmError, Options, Overloaded, Usage
from trustgraph.model.text_completion.service import spec_for

SETTINGS = Options()  # a request asking nothing of its own: the settings apply


class ReasoningServer(MistralServer):
    """Sends content as typed chunks, as Mistral's reasoning models do."""

    async def write_token(self, response, text):
        await self._event(response, self._chunk({"content": [
            {"type": "thinking", "thinking": [{"type": "text", "text": "hmm "}]},
            {"type": "text", "text": text}]}))


@pytest.fixture
async def server(request):
    server = await getattr(request, "param", MistralServer)().start()
    yield server
    await server.stop()


def mistral(url: str, **settings):
    return mistral_provider.make(mistral_provider.Settings(
        mistral_api_key="test-key", mistral_base_url=url, **settings))


async def test_request_carries_system_model_and_limits(server):
    llm = mistral(server.base_url, tg_llm_model="mistral-test", tg_llm_temperature=0.2,
                  tg_llm_max_tokens=77)
    text, usage = await run(llm.stream("Be terse.", "[tokens=2]", SETTINGS))
    assert text == expected_text(2)
    body = server.last_body
    assert body["messages"] == [{"role": "system", "content": "Be terse."},
                                {"role": "user", "content": "[tokens=2]"}]
    assert (body["model"], body["temperature"], body["max_tokens"], body["stream"]) == \
        ("mistral-test", 0.2, 77, True)
    assert "stream_options" not in body
    assert server.last_headers["Authorization"] == "Bearer test-key"
    assert usage == Usage(PROMPT_TOKENS, 2, "mistral-fake")  # the model that answered


@pytest.mark.parametrize("server", [ReasoningServer], indirect=True)
async def test_reasoning_chunks_are_not_answer_text(server):
    assert (await run(mistral(server.base_url).stream("", "[tokens=3]", SETTINGS)))[0] == \
        expected_text(3)


async def test_errors_name_the_status_and_the_servers_message(server):
    with pytest.raises(LlmError) as error:
        await run(mistral(server.base_url).stream("", "[status=400]", SETTINGS))
    assert not isinstance(error.value, Overloaded)
    assert error.value.message == "Mistral answered 400: scripted 400"
    for status in (429, 503):
        with pytest.raises(Overloaded, match=f"Mistral answered {status}"):
            await run(mistral(server.base_url).stream("", f"[status={status}]", SETTINGS))
    with pytest.raises(LlmError, match="Mistral failed mid-answer: scripted failure"):
        await run(mistral(server.base_url).stream("", "[tokens=5 fail_after=2]", SETTINGS))


async def test_no_sdk_retry_when_the_server_is_unreachable():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = "http://127.0.0.1:%d" % sock.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(LlmError, match="cannot reach Mistral"):
        await asyncio.wait_for(run(mistral(url).stream("", "hi", SETTINGS)), 5)
    assert time.monotonic() - started < 1


def test_tg_llm_selects_mistral():
    spec = spec_for("mistral")
    assert spec.name == "text-completion-mistral"
    assert "mistral_api_key" in spec.settings.model_fields
