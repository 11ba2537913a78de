"""The embeddings service over a real pulsar-lite broker, with the local
all-MiniLM-L6-v2 model (onnxruntime)."""
import asyncio
import math

import pytest
import pytest_asyncio

from trustgraph.base import Processor, Requester, ServiceError, Timing
from trustgraph.embeddings.provider import EmbeddingsSettings
from trustgraph.embeddings.service import SPEC
from trustgraph.pubsub import Bus
from trustgraph.schema import EmbeddingsRequest, EmbeddingsResponse

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def embeddings(broker):
    """One processor (and one loaded model) for the module: requests are independent."""
    processor = Processor(SPEC, EmbeddingsSettings(
        pulsar_url=broker.url, tg_embeddings_max_texts=64, tg_flows=["emb-test"]))
    await processor.start()
    bus = Bus(broker.url)
    requester = Requester(bus, "embeddings", "emb-test", "emb-test-requester",
                          timing=Timing(timeout=60))
    await requester.start()
    yield requester
    await bus.close()
    await processor.stop()


async def vectors(requester, **request) -> list[list[float]]:
    response = await requester.call(EmbeddingsRequest(**request), EmbeddingsResponse)
    assert response.end_of_stream and response.error is None
    return response.vectors


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


async def test_batch_gives_one_unit_vector_per_text_in_order(embeddings):
    texts = ["The cat sat on the mat.", "Pulsar carries the records.", "", "x" * 5000]
    batch = await vectors(embeddings, texts=texts)
    assert len(batch) == 4
    for vector in batch:
        assert len(vector) == 384
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, abs_tol=1e-5)
    # the same text alone gives the same vector: order kept, batching changes nothing
    alone = await vectors(embeddings, texts=[texts[1]])
    assert cosine(alone[0], batch[1]) > 0.9999


async def test_legacy_single_text(embeddings):
    legacy = await vectors(embeddings, text="How do I reset my password?")
    assert len(legacy) == 1 and len(legacy[0]) == 384
    modern = await vectors(embeddings, texts=["How do I reset my password?"])
    assert cosine(legacy[0], modern[0]) > 0.9999


async def test_empty_list_gives_empty_list(embeddings):
    assert await vectors(embeddings, texts=[]) == []
    assert await vectors(embeddings) == []


async def test_oversize_batch_is_a_clear_error(embeddings):
    with pytest.raises(ServiceError) as failure:
        await embeddings.call(EmbeddingsRequest(texts=["a"] * 65), EmbeddingsResponse)
    assert failure.value.error.type == "too-many-texts"
    assert "65" in failure.value.error.message and "64" in failure.value.error.message


async def test_similar_texts_score_higher_than_dissimilar(embeddings):
    query, close, far = await vectors(embeddings, texts=[
        "How do I bake sourdough bread at home?",
        "A simple recipe for baking sourdough loaves in your kitchen.",
        "The stock market fell sharply after the interest rate decision."])
    assert cosine(query, close) > cosine(query, far) + 0.3


async def test_concurrent_requests_each_get_their_own_vectors(embeddings):
    texts = [f"Document number {i} is about topic {i % 7}." for i in range(24)]
    expected = await vectors(embeddings, texts=texts)
    answers = await asyncio.gather(*(vectors(embeddings, texts=[t]) for t in texts))
    for mine, reference in zip(answers, expected, strict=True):
        assert cosine(mine[0], reference) > 0.9999
