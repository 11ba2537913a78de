"""A service called in-process (``LocalRequester``) keeps the semantics of a bus call:
frames, errors, the serving runner's limits, timeouts and cancellation.

The runner is a real ``ServiceRunner`` that is never subscribed to a bus: a local
call does not touch one.
"""
import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from tests.support.waiting import eventually
from trustgraph.base import (
    TIMING,
    Context,
    HandledError,
    ProcessorSettings,
    RequestTimeout,
    Runtime,
    Service,
    ServiceError,
    Timing,
)
from trustgraph.base.clients import Clients
from trustgraph.base.lanes import Slots
from trustgraph.base.local import LocalRequester, LocalServices
from trustgraph.base.service import ServiceRunner
from trustgraph.schema import (
    Error,
    Record,
    TextCompletionRequest,
    TextCompletionResponse,
    decode,
    encode,
)

ASK = TextCompletionRequest(prompt="hi", streaming=True)


def records(*texts: str, final: str = "") -> list[TextCompletionResponse]:
    return [TextCompletionResponse(response=t) for t in texts] + [
        TextCompletionResponse(response=final, end_of_stream=True, model="m", out_token=3)]


def runner(handler, concurrency: int = 8, backlog: int = 100) -> ServiceRunner:
    service = Service("llm", TextCompletionRequest, TextCompletionResponse, handler,
                      error_type="llm-error")
    runtime = Runtime("test", "test-1", ProcessorSettings(), None, None, TIMING)
    return ServiceRunner(None, service, "default", runtime, {}, Slots(concurrency),
                         backlog, None)


def scripted(answer: list[TextCompletionResponse]):
    async def handle(request: TextCompletionRequest, ctx: Context
                     ) -> AsyncIterator[TextCompletionResponse]:
        for record in answer:
            yield record
    return handle


class Gated:
    """A handler that says it started, sends one delta, then waits for ``gate``;
    ``closed`` is set when it is closed (as an LLM stream is)."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started = asyncio.Event()
        self.closed = asyncio.Event()
        self.active = self.peak = 0

    async def __call__(self, request: TextCompletionRequest, ctx: Context
                       ) -> AsyncIterator[TextCompletionResponse]:
        self.active += 1
        self.peak = max(self.peak, self.active)
        self.started.set()
        try:
            yield TextCompletionResponse(response="first ")
            await self.gate.wait()
            yield TextCompletionResponse(response="", end_of_stream=True)
        finally:
            self.active -= 1
            self.closed.set()


async def all_frames(requester: LocalRequester, request: Record = ASK) -> list:
    return [frame async for batch in requester.frames(request) for frame in batch]


async def test_frames_are_the_records_as_the_bus_carries_them_ending_with_one_final():
    answer = records("a ", "b ", "c ")
    frames = await all_frames(LocalRequester(runner(scripted(answer))))
    assert frames == [(encode(r), r.end_of_stream) for r in answer]


async def test_stream_and_call_decode_like_the_bus_requester():
    requester = LocalRequester(runner(scripted(records("a ", "b ", final="!"))))
    got = [r async for r in requester.stream(ASK, TextCompletionResponse)]
    assert [r.response for r in got] == ["a ", "b ", "!"]
    final = await requester.call(ASK, TextCompletionResponse)
    assert (final.end_of_stream, final.model, final.out_token) == (True, "m", 3)


async def test_records_after_the_final_one_are_not_sent():
    answer = records("a ") + [TextCompletionResponse(response="late", end_of_stream=True)]
    frames = await all_frames(LocalRequester(runner(scripted(answer))))
    assert [decode(TextCompletionResponse, f).response for f, _ in frames] == ["a ", ""]


class Loose(Record):  # what a caller may send: the service's model has ``prompt: str``
    prompt: int | list[int] = 0


async def test_a_request_the_service_cannot_read_is_a_bad_request():
    called = []

    async def handle(request, ctx):
        called.append(request)
        return records()[0]

    requester = LocalRequester(runner(handle))
    with pytest.raises(ServiceError) as failure:
        await requester.call(Loose(prompt=[1]), TextCompletionResponse)
    assert failure.value.error.type == "bad-request"
    assert "prompt" in failure.value.error.message and called == []


@pytest.mark.parametrize("exception, type, message", [
    (RuntimeError("boom"), "llm-error", "RuntimeError: boom"),
    (HandledError("rate-limited", "slow down"), "rate-limited", "slow down"),
    # a service called on the way: its error passed on as it said it
    (ServiceError(Error(type="overloaded", message="try later")), "overloaded", "try later"),
    (RequestTimeout("store on flow f sent nothing for 3 s"), "llm-error",
     "store on flow f sent nothing for 3 s"),
])
async def test_an_exception_mid_stream_ends_it_with_the_service_error(exception, type, message):
    async def handle(request, ctx):
        yield TextCompletionResponse(response="a ")
        raise exception

    seen = []
    with pytest.raises(ServiceError) as failure:
        async for record in LocalRequester(runner(handle)).stream(ASK, TextCompletionResponse):
            seen.append(record.response)
    assert seen == ["a "]
    assert (failure.value.error.type, failure.value.error.message) == (type, message)


async def test_a_handler_ending_without_a_final_record_is_an_error():
    frames = await all_frames(LocalRequester(runner(scripted(records("a ")[:1]))))
    last = decode(TextCompletionResponse, frames[-1][0])
    assert frames[-1][1] and last.error.type == "llm-error"
    assert "handler ended without a final record" in last.error.message


async def test_a_non_streaming_handler_answers_one_final_record():
    async def handle(request, ctx):
        return TextCompletionResponse(response="all", end_of_stream=True)

    [(data, final)] = await all_frames(LocalRequester(runner(handle)))
    assert final and decode(TextCompletionResponse, data).response == "all"


async def test_local_calls_wait_for_the_runners_concurrency_limit():
    handler = Gated()
    requester = LocalRequester(runner(handler, concurrency=2))
    calls = [asyncio.create_task(requester.call(ASK, TextCompletionResponse))
             for _ in range(6)]
    await eventually(lambda: handler.active >= 2, "two calls running", timeout=5, every=0)
    for _ in range(100):  # every other call is runnable: had it a slot, it would start
        await asyncio.sleep(0)
    assert handler.active == 2
    handler.gate.set()
    answers = await asyncio.gather(*calls)
    assert handler.peak == 2 and all(a.end_of_stream and a.error is None for a in answers)


async def test_past_the_backlog_a_local_call_is_refused_as_overloaded():
    handler = Gated()
    requester = LocalRequester(runner(handler, backlog=1))
    held = requester.frames(ASK)
    await anext(held)
    with pytest.raises(ServiceError) as failure:
        await requester.call(ASK, TextCompletionResponse)
    assert failure.value.error.type == "overloaded"
    await held.aclose()


async def test_leaving_early_closes_the_handler_before_returning():
    handler = Gated()
    serving = runner(handler, concurrency=1)
    frames = LocalRequester(serving).frames(ASK)
    [(data, final)] = await anext(frames)
    assert decode(TextCompletionResponse, data).response == "first " and not final
    await frames.aclose()
    assert handler.closed.is_set()  # at once: no waiting for it
    assert serving._inflight == {} and serving._limit.in_use == 0


async def test_cancelling_the_callers_task_closes_the_handler():
    handler = Gated()
    serving = runner(handler)
    call = asyncio.create_task(LocalRequester(serving).call(ASK, TextCompletionResponse))
    await asyncio.wait_for(handler.started.wait(), 5)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert handler.closed.is_set() and serving._inflight == {}


async def test_a_quiet_service_is_a_request_timeout_and_is_closed():
    handler = Gated()
    requester = LocalRequester(runner(handler), Timing(timeout=0.1))
    with pytest.raises(RequestTimeout, match="llm on flow default sent nothing for 0.1 s"):
        await requester.call(ASK, TextCompletionResponse)
    assert handler.closed.is_set()


async def test_a_serving_task_cancelled_by_id_ends_the_call_with_an_error_at_once():
    """What a cancel on the cancel topic for the inner id, or the serving processor
    stopping, does: the caller hears of it rather than waiting for its timeout."""
    handler = Gated()
    serving = runner(handler)
    request_id = uuid.uuid4().hex
    frames = LocalRequester(serving, Timing(timeout=60)).frames(ASK, request_id)
    await anext(frames)
    serving._inflight[request_id].cancel()
    with pytest.raises(ServiceError) as failure:
        async with asyncio.timeout(5):
            await anext(frames)
    assert failure.value.error.type == "llm-error"
    assert "stopped before answering" in failure.value.error.message
    assert handler.closed.is_set()


async def test_clients_use_the_local_runner_for_its_service_and_flow_only():
    local = LocalServices()
    serving = runner(scripted(records()))
    local.add(serving)
    assert local.get("llm", "default") is serving
    assert local.get("llm", "other") is None and local.get("prompt", "default") is None
    requester = await Clients(None, "default", "me", Timing(timeout=7.0), local).get("llm")
    assert isinstance(requester, LocalRequester) and requester.timing.timeout == 7.0
    local.remove(serving)
    assert local.get("llm", "default") is None


async def test_a_second_runner_for_the_same_service_does_not_replace_the_first():
    local = LocalServices()
    first, second = runner(scripted(records())), runner(scripted(records()))
    local.add(first)
    local.add(second)
    local.remove(second)
    assert local.get("llm", "default") is first
