"""What the provider contract does not cover for Cohere: the request it sends, which
usage it reports, thinking deltas, error messages, SDK retries off."""
import asyncio
import socket
import time

import pytest

from tests.support.cohere_server import CohereServer
from tests.support.scripted_llm import PROMPT_TOKENS, expected_text
from tests.support.scripted_llm import collect_text as run
from trustgraph.model.text_completion.cohere import provider as cohere_provider
from trustgraph.model.text_completion.provider import LlmError, Options, Overloaded, Usage
from trustgraph.model.text_completion.service import spec_for

SETTINGS = Options()  # a request asking nothing of its own: the settings apply


class ThinkingServer(CohereServer):
    async def write_token(self, response, text):
        await self._event(response, "content-delta", index=0,
                          delta={"message": {"content": {"thinking": "hmm "}}})
        await super().write_token(response, text)


@pytest.fixture
async def server(request):
    server = await getattr(request, "param", CohereServer)().start()
    yield server
    await server.stop()


def cohere(url: str, **settings):
    return cohere_provider.make(cohere_provider.Settings(
        cohere_api_key="test-key", cohere_base_url=url, **settings))


async def test_request_carries_system_model_and_limits(server):
    llm = cohere(server.url, tg_llm_model="command-test", tg_llm_temperature=0.2,
                 tg_llm_max_tokens=77)
    text, usage = await run(llm.stream("Be terse.", "[tokens=2]", SETTINGS))
    assert text == expected_text(2)
    body = server.last_body
    assert body["messages"] == [{"role": "system", "content": "Be terse."},
                                {"role": "user", "content": "[tokens=2]"}]
    assert (body["model"], body["temperature"], body["max_tokens"], body["stream"]) == \
        ("command-test", 0.2, 77, True)
    assert server.last_headers["Authorization"] == "Bearer test-key"
    assert usage == Usage(PROMPT_TOKENS, 2, "command-test")  # billed, not with the preamble


async def test_empty_system_prompt_is_left_out(server):
    await run(cohere(server.url).stream("", "hi", SETTINGS))
    assert [m["role"] for m in server.last_body["messages"]] == ["user"]


@pytest.mark.parametrize("server", [ThinkingServer], indirect=True)
async def test_thinking_is_not_answer_text(server):
    assert (await run(cohere(server.url).stream("", "[tokens=3]", SETTINGS)))[0] == expected_text(3)


async def test_errors_name_the_status_and_the_servers_message(server):
    with pytest.raises(LlmError) as error:
        await run(cohere(server.url).stream("", "[status=400]", SETTINGS))
    assert not isinstance(error.value, Overloaded)
    assert error.value.message == "Cohere answered 400: scripted 400"
    for status in (429, 503):
        with pytest.raises(Overloaded, match=f"Cohere answered {status}"):
            await run(cohere(server.url).stream("", f"[status={status}]", SETTINGS))
    with pytest.raises(LlmError, match="Cohere failed mid-answer: scripted failure"):
        await run(cohere(server.url).stream("", "[tokens=5 fail_after=2]", SETTINGS))


async def test_no_sdk_retry_when_the_server_is_unreachable():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = "http://127.0.0.1:%d" % sock.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(LlmError, match="Cohere stream failed: ConnectError"):
        await asyncio.wait_for(run(cohere(url).stream("", "hi", SETTINGS)), 5)
    assert time.monotonic() - started < 1


def test_tg_llm_selects_cohere():
    spec = spec_for("cohere")
    assert spec.name == "text-completion-cohere"
    assert "cohere_api_key" in spec.settings.model_fields
