"""The OpenAI-compatible and Ollama embeddings providers against small local
servers speaking those wire formats, directly and through the service on a real
broker."""
import hashlib
import random

import openai
import pytest
from aiohttp import web

from trustgraph.base import Processor, Requester, ServiceError, Timing
from trustgraph.embeddings.ollama.provider import OllamaEmbedder
from trustgraph.embeddings.openai.provider import OpenAiEmbedder
from trustgraph.embeddings.provider import EmbeddingsError, EmbeddingsSettings
from trustgraph.embeddings.service import SPEC
from trustgraph.pubsub import Bus
from trustgraph.pubsub.embedded import free_port
from trustgraph.schema import EmbeddingsRequest, EmbeddingsResponse

MISSING_MODEL = "no-such-model"


def fake_vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [round(b / 255, 4) for b in digest[:8]]


class EmbeddingServer:
    """OpenAI ``POST /v1/embeddings`` and Ollama ``POST /api/embed`` on one port."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict, dict]] = []  # (path, headers, body)
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> "EmbeddingServer":
        app = web.Application()
        app.router.add_post("/v1/embeddings", self.openai)
        app.router.add_post("/api/embed", self.ollama)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        port = free_port()
        await web.TCPSite(self.runner, "127.0.0.1", port).start()
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        await self.runner.cleanup()

    async def _body(self, request: web.Request) -> dict:
        body = await request.json()
        self.requests.append((request.path, dict(request.headers), body))
        return body

    async def openai(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        if body["model"] == MISSING_MODEL:
            return web.json_response({"error": {
                "message": f"The model `{MISSING_MODEL}` does not exist",
                "type": "invalid_request_error", "code": "model_not_found"}}, status=404)
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [{"object": "embedding", "index": i, "embedding": fake_vector(text)}
                for i, text in enumerate(inputs)]
        random.Random(len(inputs)).shuffle(data)  # the API keys items by index, not position
        return web.json_response({"object": "list", "data": data, "model": body["model"],
                                  "usage": {"prompt_tokens": 3, "total_tokens": 3}})

    async def ollama(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        if body["model"] == MISSING_MODEL:
            return web.json_response(
                {"error": f'model "{MISSING_MODEL}" not found, try pulling it first'},
                status=404)
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        return web.json_response({"model": body["model"],
                                  "embeddings": [fake_vector(t) for t in inputs],
                                  "total_duration": 1000, "load_duration": 10,
                                  "prompt_eval_count": 3})


@pytest.fixture
async def server():
    server = await EmbeddingServer().start()
    yield server
    await server.stop()


TEXTS = ["alpha", "beta", "gamma", "delta", "epsilon"]


async def test_openai_provider_keeps_order_and_asks_for_floats(server):
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=f"{server.url}/v1", max_retries=0)
    embedder = OpenAiEmbedder(client, "text-embedding-3-small")
    assert await embedder.embed(TEXTS) == [fake_vector(t) for t in TEXTS]
    path, headers, body = server.requests[-1]
    assert path == "/v1/embeddings" and headers["Authorization"] == "Bearer sk-test"
    assert body == {"model": "text-embedding-3-small", "input": TEXTS,
                    "encoding_format": "float"}


async def test_openai_provider_errors_are_clear(server):
    client = openai.AsyncOpenAI(api_key="k", base_url=f"{server.url}/v1", max_retries=0)
    with pytest.raises(EmbeddingsError, match="404.*does not exist"):
        await OpenAiEmbedder(client, MISSING_MODEL).embed(["x"])
    closed = openai.AsyncOpenAI(api_key="k", base_url=f"http://127.0.0.1:{free_port()}/v1",
                                max_retries=0)
    with pytest.raises(EmbeddingsError, match="cannot reach"):
        await OpenAiEmbedder(closed, "m").embed(["x"])


async def test_ollama_provider(server):
    embedder = OllamaEmbedder(server.url, "all-minilm")
    assert await embedder.embed(TEXTS) == [fake_vector(t) for t in TEXTS]
    path, _, body = server.requests[-1]
    assert path == "/api/embed"
    assert body["model"] == "all-minilm" and body["input"] == TEXTS
    with pytest.raises(EmbeddingsError, match="404.*not found, try pulling"):
        await OllamaEmbedder(server.url, MISSING_MODEL).embed(["x"])
    unreachable = OllamaEmbedder(f"http://127.0.0.1:{free_port()}", "all-minilm")
    with pytest.raises(EmbeddingsError, match="cannot reach Ollama"):
        await unreachable.embed(["x"])


@pytest.mark.parametrize("provider", ["openai", "ollama"])
async def test_service_with_remote_provider(broker, server, provider):
    url = f"{server.url}/v1" if provider == "openai" else server.url
    flow = f"emb-{provider}"
    processor = Processor(SPEC, EmbeddingsSettings(
        pulsar_url=broker.url, tg_flows=[flow], tg_embeddings=provider,
        tg_embeddings_url=url, tg_embeddings_model="served-model"))
    await processor.start()
    bus = Bus(broker.url)
    requester = Requester(bus, "embeddings", flow, f"{flow}-requester", timing=Timing(timeout=30))
    await requester.start()
    try:
        response = await requester.call(EmbeddingsRequest(texts=TEXTS), EmbeddingsResponse)
        assert response.vectors == [fake_vector(t) for t in TEXTS]
        legacy = await requester.call(EmbeddingsRequest(text="solo"), EmbeddingsResponse)
        assert legacy.vectors == [fake_vector("solo")]
        assert server.requests[-1][2]["model"] == "served-model"
        empty = await requester.call(EmbeddingsRequest(texts=[]), EmbeddingsResponse)
        assert empty.vectors == [] and len(server.requests) == 2  # no call for nothing
    finally:
        await bus.close()
        await processor.stop()


async def test_service_reports_provider_failure(broker, server):
    processor = Processor(SPEC, EmbeddingsSettings(
        pulsar_url=broker.url, tg_flows=["emb-fail"], tg_embeddings="ollama",
        tg_embeddings_url=server.url, tg_embeddings_model=MISSING_MODEL))
    await processor.start()
    bus = Bus(broker.url)
    requester = Requester(bus, "embeddings", "emb-fail", "emb-fail-requester",
                          timing=Timing(timeout=30))
    await requester.start()
    try:
        with pytest.raises(ServiceError) as failure:
            await requester.call(EmbeddingsRequest(texts=["x"]), EmbeddingsResponse)
        assert failure.value.error.type == "embeddings-error"
        assert "not found" in failure.value.error.message
    finally:
        await bus.close()
        await processor.stop()
