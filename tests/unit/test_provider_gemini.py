"""What the provider contract does not cover for Gemini (Google AI Studio and Vertex
AI): the request each sends, thinking, refusals, error messages, SDK retries off."""
import asyncio
import re
import socket
import time

import pytest

from tests.support.gemini_server import GeminiServer, GoogleAiStudioCase, VertexAiCase
from tests.support.scripted_llm import PROMPT_TOKENS, expected_text
from tests.support.scripted_llm import collect_text as run
from trustgraph.model.text_completion.googleaistudio import provider as studio
from trustgraph.model.text_completion.provider import LlmError, Options, Overloaded, Usage
from trustgraph.model.text_completion.service import spec_for
from trustgraph.model.text_completion.vertexai import provider as vertex

SETTINGS = Options()  # a request asking nothing of its own: the settings apply


class ThinkingServer(GeminiServer):
    """Sends a thought part before the answer and bills thinking tokens."""

    async def open_stream(self, request, body):
        response = await super().open_stream(request, body)
        thought = self._response("")
        thought["candidates"][0]["content"]["parts"] = [{"text": "hmm...", "thought": True}]
        await self._event(response, thought)
        return response

    async def write_end(self, response, body, script):
        end = self._response("", finish="STOP", out_tokens=script.tokens)
        end["usageMetadata"]["thoughtsTokenCount"] = 7
        await self._event(response, end)


class CutServer(GeminiServer):
    """Ends every answer with a safety stop."""

    async def write_end(self, response, body, script):
        await self._event(response, self._response("", finish="SAFETY"))


class RefusingServer(GeminiServer):
    """Blocks every prompt: no candidates, only prompt feedback."""

    async def write_token(self, response, text):
        await self._event(response, {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
                                     "usageMetadata": {"promptTokenCount": PROMPT_TOKENS}})


def provider(case, server: GeminiServer, **settings):
    module = studio if case is GoogleAiStudioCase else vertex
    return module.make(module.Settings(**{**case.settings(server), **settings}))


@pytest.fixture
async def server(request):
    server = await getattr(request, "param", GeminiServer)().start()
    yield server
    await server.stop()


async def test_ai_studio_request(server):
    llm = provider(GoogleAiStudioCase, server, tg_llm_temperature=0.3, tg_llm_max_tokens=77)
    assert (await run(llm.stream("Be terse.", "[tokens=2]", SETTINGS)))[0] == expected_text(2)
    path = r"/v1(beta)?/models/gemini-fake:streamGenerateContent"  # the SDK picks the version
    assert re.fullmatch(path, server.last_path)
    assert server.last_headers["x-goog-api-key"] == "test-key"
    body = server.last_body
    assert body["contents"] == [{"parts": [{"text": "[tokens=2]"}], "role": "user"}]
    assert body["systemInstruction"]["parts"] == [{"text": "Be terse."}]
    assert body["generationConfig"] == {"temperature": 0.3, "maxOutputTokens": 77}


async def test_vertex_request_names_project_location_and_sends_the_token(server):
    assert (await run(provider(VertexAiCase, server).stream("", "[tokens=2]", SETTINGS)))[0] == \
        expected_text(2)
    assert server.last_path == ("/v1beta1/projects/test-project/locations/us-central1/"
                                "publishers/google/models/gemini-fake:streamGenerateContent")
    assert server.last_headers["Authorization"] == "Bearer test-token"
    assert "systemInstruction" not in server.last_body


@pytest.mark.parametrize("server", [ThinkingServer], indirect=True)
async def test_thoughts_are_not_answer_text_but_are_billed_as_output(server):
    text, usage = await run(provider(GoogleAiStudioCase, server).stream("", "[tokens=3]", SETTINGS))
    assert text == expected_text(3)
    assert usage == Usage(PROMPT_TOKENS, 3 + 7, "gemini-fake")


@pytest.mark.parametrize("server", [CutServer], indirect=True)
async def test_an_answer_stopped_by_a_filter_is_an_error_after_its_text(server):
    pieces = []
    with pytest.raises(LlmError, match="stopped the answer: SAFETY$"):
        async for piece in provider(GoogleAiStudioCase, server).stream("", "[tokens=3]", SETTINGS):
            pieces.append(piece)
    assert "".join(pieces) == expected_text(3)


@pytest.mark.parametrize("server", [RefusingServer], indirect=True)
async def test_a_refused_prompt_is_an_error(server):
    with pytest.raises(LlmError, match="refused the prompt: PROHIBITED_CONTENT$"):
        await run(provider(VertexAiCase, server).stream("", "[tokens=3]", SETTINGS))


@pytest.mark.parametrize("case", [GoogleAiStudioCase, VertexAiCase])
async def test_errors_name_the_status_and_the_servers_message(server, case):
    with pytest.raises(LlmError) as error:
        await run(provider(case, server).stream("", "[status=400]", SETTINGS))
    assert not isinstance(error.value, Overloaded)
    assert "400 INVALID_ARGUMENT: scripted 400" in error.value.message
    for status in (429, 503):
        with pytest.raises(Overloaded, match=f"{status} "):
            await run(provider(case, server).stream("", f"[status={status}]", SETTINGS))


async def test_an_error_event_mid_stream_names_the_servers_message(server):
    with pytest.raises(LlmError, match="500 INTERNAL: scripted failure"):
        await run(provider(GoogleAiStudioCase, server).stream("", "[tokens=5 fail_after=2]",
                                                              SETTINGS))


async def test_no_sdk_retry_when_the_server_is_unreachable():
    # the error comes at once: no retry, no sleep inside the SDK
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = "http://127.0.0.1:%d" % sock.getsockname()[1]
    llm = studio.make(studio.Settings(google_api_key="k", google_ai_studio_base_url=url))
    started = time.monotonic()
    with pytest.raises(LlmError, match="Gemini .*failed: ConnectError"):
        await asyncio.wait_for(run(llm.stream("", "hi", SETTINGS)), 5)
    assert time.monotonic() - started < 1


def test_tg_llm_selects_each_provider():
    for name, field in (("googleaistudio", "google_api_key"),
                        ("vertexai", "google_cloud_project")):
        spec = spec_for(name)
        assert spec.name == f"text-completion-{name}"
        assert field in spec.settings.model_fields

