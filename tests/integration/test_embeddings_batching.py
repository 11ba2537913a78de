"""The embeddings batcher (no broker needed): concurrent requests share model
runs, short texts go first and run apart from long ones, order is kept,
cancelled work is skipped, a failing run fails only its own requests."""
import asyncio
import threading

import numpy as np
import pytest

from trustgraph.embeddings.minilm.batcher import SHORT_TEXT, Batcher

LONG = "x" * (SHORT_TEXT + 1)


class FakeModel:
    """Vectors [len(text), index in its run]; records every run's texts."""

    def __init__(self, delay: float = 0.0, fail_on: str = "") -> None:
        self.runs: list[list[str]] = []
        self.delay = delay
        self.fail_on = fail_on
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.gate.wait(5)
        self.runs.append(list(texts))
        if self.fail_on in texts:
            raise RuntimeError("model failed")
        threading.Event().wait(self.delay)
        return np.array([[len(t), i] for i, t in enumerate(texts)], dtype=np.float32)


async def test_vectors_come_back_in_order_for_every_request():
    model = FakeModel()
    batcher = Batcher(model, batch=4)
    texts = [LONG + "y" * i for i in range(10)]
    vectors = await batcher.embed(texts)
    assert [int(v[0]) for v in vectors] == [len(t) for t in texts]
    assert [len(run) for run in model.runs] == [4, 4, 2]
    assert (await batcher.embed([])).shape[0] == 0


async def test_concurrent_one_text_requests_share_runs():
    model = FakeModel()
    model.gate.clear()  # hold the first run so that the rest queue up behind it
    batcher = Batcher(model, batch=4)
    first = asyncio.ensure_future(batcher.embed([LONG + "first"]))
    await asyncio.sleep(0.05)
    rest = [asyncio.ensure_future(batcher.embed([LONG + str(i)])) for i in range(8)]
    await asyncio.sleep(0.05)
    model.gate.set()
    await asyncio.gather(first, *rest)
    assert [len(run) for run in model.runs] == [1, 4, 4]
    assert [int((await r)[0][0]) for r in rest] == [len(LONG) + 1] * 8


async def test_short_texts_go_first_and_run_apart():
    model = FakeModel()
    model.gate.clear()
    batcher = Batcher(model, batch=2, short_batch=8)
    running = asyncio.ensure_future(batcher.embed([LONG + "running"]))
    await asyncio.sleep(0.05)
    chunks = [asyncio.ensure_future(batcher.embed([LONG + str(i)])) for i in range(4)]
    queries = [asyncio.ensure_future(batcher.embed([f"query {i}"])) for i in range(3)]
    await asyncio.sleep(0.05)
    model.gate.set()
    await asyncio.gather(running, *chunks, *queries)
    assert model.runs[1] == ["query 0", "query 1", "query 2"]  # next after the running one
    assert all(len(t) > SHORT_TEXT for run in model.runs[2:] for t in run)
    assert [len(run) for run in model.runs[2:]] == [2, 2]


async def test_cancelled_requests_are_not_run():
    model = FakeModel()
    model.gate.clear()
    batcher = Batcher(model, batch=1)
    running = asyncio.ensure_future(batcher.embed(["running"]))
    await asyncio.sleep(0.05)
    doomed = asyncio.ensure_future(batcher.embed(["doomed"]))
    kept = asyncio.ensure_future(batcher.embed(["kept"]))
    await asyncio.sleep(0.01)
    doomed.cancel()
    model.gate.set()
    await asyncio.gather(running, kept)
    assert model.runs == [["running"], ["kept"]]


async def test_a_failing_run_fails_its_requests_only():
    model = FakeModel(fail_on="bad")
    model.gate.clear()
    batcher = Batcher(model, batch=2)
    running = asyncio.ensure_future(batcher.embed([LONG]))
    await asyncio.sleep(0.05)
    bad = asyncio.ensure_future(batcher.embed(["bad", "also in the bad run"]))
    good = asyncio.ensure_future(batcher.embed(["good"]))  # shares the failing run
    model.gate.set()
    await running
    with pytest.raises(RuntimeError, match="model failed"):
        await bad
    assert int((await good)[0][0]) == len("good")
    assert model.runs[1:] == [["bad", "also in the bad run", "good"],
                              ["bad", "also in the bad run"], ["good"]]


async def test_the_model_runs_off_the_event_loop():
    model = FakeModel(delay=0.3)
    batcher = Batcher(model, batch=4)
    ticks = 0

    async def tick():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.ensure_future(tick())
    await batcher.embed(["slow"])
    ticker.cancel()
    assert ticks >= 10  # the loop kept running while the model worked
