"""Bedrock specifics beyond the provider contract: the Converse request it sends, the
event-stream frames, and which in-stream exceptions count as overload."""
import pytest
from botocore.eventstream import EventStreamBuffer

from tests.support.bedrock_server import BedrockServer, Case, event, exception
from tests.support.scripted_llm import answered
from trustgraph.model.text_completion.bedrock.provider import Settings, make
from trustgraph.model.text_completion.provider import LlmError, Options, Overloaded, Usage
from trustgraph.model.text_completion.retry import Retrying

SETTINGS = Options()  # a request asking nothing of its own: the settings apply


class ThrottlingInStream(BedrockServer):
    async def write_error(self, response, message):
        await response.write(exception("throttlingException", message))


class PeerRecording(BedrockServer):
    def __init__(self):
        super().__init__()
        self.peers = []

    async def converse_stream(self, request):
        self.peers.append(request.transport.get_extra_info("peername"))
        return await super().converse_stream(request)


@pytest.fixture
async def served():
    servers, providers = [], []

    async def start(server_class=BedrockServer, **settings):
        server = await server_class().start()
        provider = make(Settings(**Case.settings(server), **settings))
        servers.append(server)
        providers.append(provider)
        return server, provider

    yield start
    for provider in providers:
        await provider.aclose()
    for server in servers:
        await server.stop()


def test_frames_decode_with_botocore():
    buffer = EventStreamBuffer()
    buffer.add_data(event("contentBlockDelta", {"delta": {"text": "hi"}})
                    + exception("throttlingException", "slow down"))
    first, second = list(buffer)
    assert first.headers[":event-type"] == "contentBlockDelta"
    assert b'"text": "hi"' in first.payload
    assert second.headers[":message-type"] == "exception"
    assert second.headers[":exception-type"] == "throttlingException"


async def test_sends_a_converse_request_for_the_configured_model(served):
    server, provider = await served(tg_llm_model="amazon.nova-lite-v1:0",
                                    tg_llm_max_tokens=77, tg_llm_temperature=0.25)
    pieces = [p async for p in provider.stream("Be terse.", "[tokens=2] hello", SETTINGS)]
    assert pieces[-1] == Usage(11, 2, "amazon.nova-lite-v1:0")
    assert server.model_ids == ["amazon.nova-lite-v1:0"]
    assert server.last_body["system"] == [{"text": "Be terse."}]
    assert server.last_body["messages"] == [
        {"role": "user", "content": [{"text": "[tokens=2] hello"}]}]
    assert server.last_body["inferenceConfig"] == {"maxTokens": 77, "temperature": 0.25}


async def test_no_system_block_without_a_system_prompt(served):
    server, provider = await served()
    [p async for p in provider.stream("", "[tokens=1]", SETTINGS)]
    assert "system" not in server.last_body


async def test_exception_frame_mid_stream_carries_its_message(served):
    server, provider = await served()
    with pytest.raises(LlmError, match="modelStreamErrorException: scripted failure"):
        [p async for p in provider.stream("", "[tokens=5 fail_after=2]", SETTINGS)]


async def test_throttling_frame_before_the_first_token_is_overload(served):
    server, provider = await served(ThrottlingInStream)
    with pytest.raises(Overloaded):
        [p async for p in provider.stream("", "[tokens=5 fail_after=0]", SETTINGS)]
    with pytest.raises(LlmError, match="still overloaded"):
        [p async for p in answered(Retrying(provider, 1, base_delay=0.01), "", "[fail_after=0]")]
    assert server.stats.requests == 3


async def test_http_throttling_is_overload_and_botocore_does_not_retry(served):
    server, provider = await served()
    with pytest.raises(Overloaded, match="ThrottlingException"):
        [p async for p in provider.stream("", "[status=429]", SETTINGS)]
    with pytest.raises(Overloaded, match="ServiceUnavailableException"):
        [p async for p in provider.stream("", "[status=503]", SETTINGS)]
    assert server.stats.requests == 2


async def test_one_connection_serves_consecutive_requests(served):
    server, provider = await served(PeerRecording)
    for _ in range(3):
        [p async for p in provider.stream("", "[tokens=3]", SETTINGS)]
    assert len(server.peers) == 3 and len(set(server.peers)) == 1
