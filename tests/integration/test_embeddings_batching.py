"""The embeddings batcher (no broker needed): concurrent requests share model
runs, a question's texts go before a load's and have a run of their own, a load's
short and long texts go in order of arrival and run apart, order is kept,
cancelled work is skipped, a failing run fails only its own requests, bulk runs go
on threads of lower priority."""
import asyncio
import os
import sys
import threading

import numpy as np
import pytest

from trustgraph.base import BULK, set_lane
from trustgraph.base.lanes import BULK_NICE, MAX_NICE
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
    set_lane(BULK)  # a load's requests: one run at a time here (runs=1)
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


async def test_bulk_short_and_long_texts_go_in_order_of_arrival_and_run_apart():
    set_lane(BULK)  # a load's requests: one run at a time here (runs=1)
    model = FakeModel()
    model.gate.clear()
    batcher = Batcher(model, batch=2, short_batch=8)
    running = asyncio.ensure_future(batcher.embed([LONG + "running"]))
    await asyncio.sleep(0.05)
    chunks = [asyncio.ensure_future(batcher.embed([LONG + str(i)])) for i in range(4)]
    labels = [asyncio.ensure_future(batcher.embed([f"label {i}"])) for i in range(3)]
    await asyncio.sleep(0.05)
    model.gate.set()
    await asyncio.gather(running, *chunks, *labels)
    # The labels came last: they wait their turn, and then run together, apart.
    assert model.runs[1:] == [[LONG + "0", LONG + "1"], [LONG + "2", LONG + "3"],
                              ["label 0", "label 1", "label 2"]]


class HeldModel:
    """Records each run as it starts; a run holding a text of ``held`` waits for
    that text's event (in the model's own thread), every other run ends at once."""

    def __init__(self, *held: str) -> None:
        self.held = {text: threading.Event() for text in held}
        self.runs: list[list[str]] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.runs.append(list(texts))
        for text in texts:
            if text in self.held:
                assert self.held[text].wait(10), f"{text!r} was never released"
        return np.array([[len(t), 0] for t in texts], dtype=np.float32)


async def bulk_embed(batcher: Batcher, texts: list[str]):
    set_lane(BULK)  # this task's: a load's request
    return await batcher.embed(texts)


async def test_a_question_goes_before_long_texts_and_any_bulk_text():
    """Both runs busy (a load's, and a question's kept one), then a load's labels,
    long interactive texts and questions queue: as the question's run frees, the
    questions go first, then the long texts; the labels wait for the load's run."""
    model = HeldModel("held question", "held chunk")
    batcher = Batcher(model, batch=2, short_batch=8, runs=1)
    load = asyncio.ensure_future(bulk_embed(batcher, ["held chunk"]))
    asked = asyncio.ensure_future(batcher.embed(["held question"]))
    labels = asyncio.ensure_future(bulk_embed(batcher, ["label 0", "label 1"]))
    chunks = [asyncio.ensure_future(batcher.embed([LONG + str(i)])) for i in range(2)]
    queries = [asyncio.ensure_future(batcher.embed([f"query {i}"])) for i in range(2)]
    await asyncio.sleep(0)  # every request queued
    model.held["held question"].set()
    await asyncio.gather(asked, *chunks, *queries)
    assert model.runs[2:] == [["query 0", "query 1"], [LONG + "0", LONG + "1"]]
    assert not labels.done()
    model.held["held chunk"].set()
    await asyncio.gather(load, labels)
    assert model.runs[-1] == ["label 0", "label 1"]


async def test_a_question_is_served_while_a_bulk_backlog_waits():
    """A load's runs held (an event, in the model's own thread), a backlog of its
    requests queued behind them: a question's run goes on the run kept for
    interactive work, and its vector comes back while the load still waits."""
    hold = threading.Event()

    def model(texts: list[str]) -> np.ndarray:
        if any(t.startswith("chunk") for t in texts):
            assert hold.wait(10), "the bulk run was never released"
        return np.array([[len(t), 0] for t in texts], dtype=np.float32)

    batcher = Batcher(model, batch=1, runs=1)
    backlog = [asyncio.ensure_future(bulk_embed(batcher, [f"chunk {i}"])) for i in range(20)]
    question = await asyncio.wait_for(batcher.embed(["what is a cockatoo?"]), 10)
    assert int(question[0][0]) == len("what is a cockatoo?")
    assert not any(load.done() for load in backlog)
    hold.set()
    assert len(await asyncio.gather(*backlog)) == 20


async def test_cancelled_requests_are_not_run():
    set_lane(BULK)  # one run at a time here (runs=1)
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
    set_lane(BULK)  # one run at a time here (runs=1)
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


@pytest.mark.skipif(sys.platform != "linux", reason="a thread's own nice is Linux's")
async def test_bulk_runs_go_on_threads_of_lower_priority_and_questions_do_not():
    niceness: dict[str, int] = {}

    def model(texts: list[str]) -> np.ndarray:
        niceness[texts[0]] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        return np.zeros((len(texts), 2), dtype=np.float32)

    batcher = Batcher(model, batch=1, runs=1)
    await batcher.embed(["question"])
    set_lane(BULK)
    await batcher.embed([LONG])
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert niceness == {"question": base, LONG: min(MAX_NICE, base + BULK_NICE)}
