"""``Collector``: texts asked for at once share requests, each gets its own vector,
and a text refused for good fails alone."""
import asyncio

import pytest

from trustgraph.base import Rejected
from trustgraph.ingest.collector import Collector


class Service:
    """Records each request; a text starting "bad" makes its whole request fail for
    good, "flaky" for now."""

    def __init__(self) -> None:
        self.requests: list[list[str]] = []

    async def send(self, texts: list[str]) -> list[list[float]]:
        self.requests.append(texts)
        await asyncio.sleep(0)  # a round trip: others may queue meanwhile
        if any(t.startswith("bad") for t in texts):
            raise Rejected("cannot embed that")
        if any(t.startswith("flaky") for t in texts):
            raise RuntimeError("service briefly away")
        return [[float(len(t))] for t in texts]


async def test_texts_asked_for_together_share_requests_of_at_most_max_texts():
    service = Service()
    collector = Collector(service.send, max_texts=4, in_flight=2)
    texts = ["x" * n for n in range(1, 11)]
    vectors = await asyncio.gather(*(collector.vector(t) for t in texts))
    assert vectors == [[float(n)] for n in range(1, 11)]
    assert [len(r) for r in service.requests] == [4, 4, 2]
    assert sorted(t for r in service.requests for t in r) == sorted(texts)


async def test_a_refused_text_is_tried_alone_and_fails_only_itself():
    service = Service()
    collector = Collector(service.send, max_texts=8)
    results = await asyncio.gather(*(collector.vector(t) for t in ["a", "bad", "cc"]),
                                   return_exceptions=True)
    assert results[0] == [1.0] and results[2] == [2.0]
    assert isinstance(results[1], Rejected)
    assert service.requests == [["a", "bad", "cc"], ["a"], ["bad"], ["cc"]]


async def test_a_passing_failure_fails_the_whole_request_for_redelivery():
    service = Service()
    collector = Collector(service.send, max_texts=8)
    results = await asyncio.gather(*(collector.vector(t) for t in ["a", "flaky"]),
                                   return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)
    assert service.requests == [["a", "flaky"]]  # not retried here: the stage nacks


async def test_a_caller_cancelled_while_waiting_is_left_out():
    service = Service()
    collector = Collector(service.send, max_texts=8, in_flight=1)
    first = asyncio.ensure_future(collector.vector("first"))
    gone = asyncio.ensure_future(collector.vector("gone"))
    await asyncio.sleep(0)  # both wait; the request has not been sent yet
    gone.cancel()
    assert await first == [5.0]
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert service.requests == [["first"]]
