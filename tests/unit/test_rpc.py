"""The request/response protocol's state machine (``trustgraph.base.rpc``), on a clock
the test moves: a request's ``Call`` at its requester (ordering, sequence gaps,
re-sends until accepted, no-service, liveness, keep-alives, the record timeout) and
its ``Reply`` at the serving runner (the deferred ``accepted`` marker, keep-alives,
``seq`` and ``end``)."""
import asyncio

import pytest

from trustgraph.base import Delta, RequestTimeout, ServiceError, Timing
from trustgraph.base.local import LocalReply
from trustgraph.base.reply import BusReply, Kept
from trustgraph.base.rpc import MAX_PENDING, Call
from trustgraph.schema import TextCompletionResponse, encode

TIMING = Timing(timeout=30.0, resend=1.0, accept_timeout=5.0, keep_alive=2.0, beats=5,
                accept_after=0.05)


class Clock:
    """The running loop's clock, moved by the test: timers fire when it passes them,
    never because the machine was slow."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.now = self.loop.time()
        self.loop.time = lambda: self.now  # type: ignore[method-assign]

    async def advance(self, seconds: float) -> None:
        self.now += seconds
        for _ in range(20):  # let what became due run, and what it woke
            await asyncio.sleep(0)


@pytest.fixture
async def clock():
    clock = Clock()
    yield clock
    del clock.loop.time  # the loop's own again


def call(timing: Timing = TIMING) -> Call:
    return Call(timing, "text-completion", "default")


async def pending(awaitable) -> asyncio.Task:
    task = asyncio.ensure_future(awaitable)
    for _ in range(5):
        await asyncio.sleep(0)
    return task


# --- the records of a call ----------------------------------------------------------------

async def test_batches_whatever_has_arrived_in_order(clock):
    request = call()
    for seq in range(3):
        request.put((b"%d" % seq, seq == 2), seq)
    assert await request.next() == [(b"0", False), (b"1", False), (b"2", True)]
    assert request.finished and request.accepted


async def test_waits_for_the_first_record(clock):
    request = call()
    request.accept()
    waiting = await pending(request.next())
    assert not waiting.done()
    request.put((b"x", True), 0)
    assert await waiting == [(b"x", True)]


async def test_a_gap_in_seq_fails_after_the_records_before_it(clock):
    request = call()
    request.put((b"a", False), 0)
    request.put((b"c", False), 2)  # 1 was lost
    request.put((b"d", True), 3)
    assert await request.next() == [(b"a", False)]
    with pytest.raises(ServiceError) as failure:
        await request.next()
    assert failure.value.error.type == "responses-lost"
    assert "1 response record(s) lost" in failure.value.error.message


async def test_records_without_seq_are_taken_in_order(clock):
    request = call()  # in-process replies, and senders that number nothing
    request.put((Delta("a"), False), None)
    request.put((b"b", True), None)
    assert len(await request.next()) == 2


async def test_a_reader_that_never_reads_overflows_instead_of_growing(clock):
    request = call()
    for seq in range(MAX_PENDING + 1):
        request.put((b"x", False), seq)
    assert len(await request.next()) == MAX_PENDING
    with pytest.raises(ServiceError, match="overflow"):
        await request.next()


# --- until a replica accepts it -----------------------------------------------------------

async def test_sent_again_sooner_at_first_then_every_resend_until_no_service(clock):
    # times in binary fractions, so the clock's steps add up exactly
    request = call(Timing(timeout=30.0, first_resend=0.25, resend=1.0, accept_timeout=5.0,
                          keep_alive=2.0, beats=5, accept_after=0.05))
    started, sent_at = clock.now, []
    with pytest.raises(ServiceError) as failure:
        while True:
            waiting = await pending(request.next())
            while not waiting.done():
                await clock.advance(0.125)
            assert await waiting is None  # send it again
            sent_at.append(clock.now - started)
    # after 0.25 s, doubling up to every resend (1 s); at 5 s: given up
    assert sent_at == [0.25, 0.75, 1.75, 2.75, 3.75, 4.75]
    assert failure.value.error.type == "no-service"
    assert "no text-completion processor took the request" in failure.value.error.message


async def keep_alives(request: Call, clock, seconds: float) -> None:
    """``seconds`` pass, the service saying every ``keep_alive`` that it has the request."""
    for _ in range(int(seconds / TIMING.keep_alive)):
        await clock.advance(TIMING.keep_alive)
        request.accept()


async def test_the_accepted_marker_ends_the_resends(clock):
    request = call()
    waiting = await pending(request.next())
    request.accept()
    await keep_alives(request, clock, TIMING.accept_timeout + 1)
    assert not waiting.done()  # accepted: nothing sent again, no-service never comes
    request.put((b"x", True), 0)
    assert await waiting == [(b"x", True)]


async def test_a_first_record_is_acceptance_too(clock):
    request = call()
    request.put((b"a", False), 0)
    assert await request.next() == [(b"a", False)]
    waiting = await pending(request.next())
    await keep_alives(request, clock, TIMING.accept_timeout + 1)
    assert not waiting.done()
    waiting.cancel()


# --- once accepted ------------------------------------------------------------------------

async def test_not_a_word_asks_after_the_answer_then_is_an_answer_lost(clock):
    """Quiet for a keep-alive and a half, the requester asks after its answer (it may
    have been dropped on its way), again every keep-alive; quiet for the liveness,
    it takes the answer as lost."""
    request = call()
    request.accept()
    started, asked_at = clock.now, []
    with pytest.raises(RequestTimeout, match="went quiet: not a word for 10 s"):
        while True:
            waiting = await pending(request.next())
            while not waiting.done():
                await clock.advance(0.25)
            assert await waiting is None  # ask after it
            asked_at.append(clock.now - started)
    assert asked_at == [3.0, 5.0, 7.0, 9.0]
    assert clock.now - started == TIMING.liveness


async def test_a_record_sent_again_that_had_arrived_is_ignored(clock):
    request = call()
    request.put((b"a", False), 0)
    request.put((b"a", False), 0)  # the answer sent again, after a probe
    request.put((b"b", True), 1)
    assert await request.next() == [(b"a", False), (b"b", True)]


async def test_keep_alives_hold_a_quiet_request_until_its_timeout(clock):
    request = call()
    request.accept()
    waiting = await pending(request.next())
    for _ in range(int(TIMING.timeout / TIMING.keep_alive) - 1):
        await clock.advance(TIMING.keep_alive)
        request.accept()  # a keep-alive
    assert not waiting.done()  # far past the liveness, alive all along
    await clock.advance(TIMING.keep_alive)
    with pytest.raises(RequestTimeout, match="sent nothing for 30 s"):
        await waiting


async def test_a_request_queued_behind_other_work_is_not_timed_out(clock):
    """Keep-alives that say ``queued`` (the service is busy, not stuck) start the wait
    for a record again; once they stop saying it, the timeout runs from the last."""
    request = call()
    request.accept(queued=True)
    waiting = await pending(request.next())
    for _ in range(int(3 * TIMING.timeout / TIMING.keep_alive)):  # three timeouts long
        await clock.advance(TIMING.keep_alive)
        request.accept(queued=True)
    assert not waiting.done()
    for _ in range(int(TIMING.timeout / TIMING.keep_alive) - 1):  # working: not queued
        await clock.advance(TIMING.keep_alive)
        request.accept()
    assert not waiting.done()
    await clock.advance(TIMING.keep_alive)
    with pytest.raises(RequestTimeout, match="sent nothing for 30 s"):
        await waiting


async def test_each_record_gives_the_next_its_own_timeout(clock):
    timing = Timing(timeout=3.0, keep_alive=2.0)  # liveness 10 s: the timeout decides
    request = call(timing)
    request.accept()
    for seq in range(5):  # a record every 2 s: 10 s in all, never 3 s without one
        waiting = await pending(request.next())
        await clock.advance(2.0)
        request.put((b"x", False), seq)
        assert await waiting == [(b"x", False)]
    waiting = await pending(request.next())
    await clock.advance(3.0)
    with pytest.raises(RequestTimeout, match="sent nothing for 3 s"):
        await waiting
    request.close()


def test_timing_says_what_depends_on_what():
    assert Timing(keep_alive=0.1).liveness == pytest.approx(0.5)
    with pytest.raises(ValueError, match="accept_after"):
        Timing(accept_after=1.0, resend=1.0)  # the deferred marker would cause re-sends


# --- the serving side -------------------------------------------------------------------

class Producer:
    def __init__(self) -> None:
        self.messages: list[tuple[str, bytes, dict[str, str]]] = []

    async def post(self, data: bytes, properties: dict[str, str]) -> None:
        self.messages.append(("post", data, properties))

    async def send(self, data: bytes, properties: dict[str, str]) -> None:
        self.messages.append(("send", data, properties))


async def test_records_numbered_by_seq_the_last_marked_end_and_awaited(clock):
    producer = Producer()
    reply = BusReply(producer, TextCompletionResponse, "r1")
    await reply.send(Delta("a"), False)
    await reply.send(TextCompletionResponse(response="", end_of_stream=True), True)
    assert producer.messages == [
        ("post", encode(TextCompletionResponse(response="a")), {"id": "r1", "seq": "0"}),
        ("send", encode(TextCompletionResponse(end_of_stream=True)),
         {"id": "r1", "seq": "1", "end": "1"})]


async def test_a_quick_first_record_goes_without_an_accepted_marker(clock):
    producer = Producer()
    reply = BusReply(producer, TextCompletionResponse, "r1")
    reply.open(TIMING)
    await clock.advance(TIMING.accept_after / 2)
    await reply.send(Delta("a"), False)
    await clock.advance(TIMING.accept_after * 2)
    assert [properties for _, _, properties in producer.messages] == [{"id": "r1", "seq": "0"}]
    reply.close()


async def test_a_quiet_request_is_marked_accepted_after_accept_after(clock):
    producer = Producer()
    reply = BusReply(producer, TextCompletionResponse, "r1")
    reply.open(TIMING)
    await clock.advance(TIMING.accept_after)
    assert producer.messages == [("post", b"", {"id": "r1", "accepted": "1"})]


async def test_keep_alives_only_for_a_request_that_sent_nothing_since(clock):
    producer = Producer()
    reply = BusReply(producer, TextCompletionResponse, "r1")
    await reply.keep_alive()  # quiet (waiting for a slot, or for the LLM)
    await reply.send(Delta("a"), False)
    await reply.keep_alive()  # a record went out since: no need
    await reply.keep_alive()  # quiet again
    assert [properties.get("accepted") for _, _, properties in producer.messages] == [
        "1", None, "1"]


async def test_a_reply_waiting_behind_other_work_says_queued(clock):
    producer = Producer()
    reply = BusReply(producer, TextCompletionResponse, "r1")
    reply.queued += 1  # a wait for a slot, or in the model's queue (lanes.queued_until)
    reply.open(TIMING)
    await clock.advance(TIMING.accept_after)
    await reply.keep_alive()
    reply.queued -= 1
    await reply.keep_alive()
    assert [properties for _, _, properties in producer.messages] == [
        {"id": "r1", "accepted": "1", "queued": "1"},
        {"id": "r1", "accepted": "1", "queued": "1"}, {"id": "r1", "accepted": "1"}]


async def test_asked_after_an_answer_it_sends_the_records_the_requester_lacks(clock):
    producer = Producer()
    reply = BusReply(producer, TextCompletionResponse, "r1")
    reply.again(0)  # in hand, nothing sent yet: it says so
    await clock.advance(0)
    await reply.send(Delta("a"), False)
    await reply.send(TextCompletionResponse(end_of_stream=True), True)
    reply.again(1)  # the requester has record 0: 1, the final, again
    await clock.advance(0)
    assert [(how, properties) for how, _, properties in producer.messages] == [
        ("post", {"id": "r1", "accepted": "1"}), ("post", {"id": "r1", "seq": "0"}),
        ("send", {"id": "r1", "seq": "1", "end": "1"}),
        ("post", {"id": "r1", "seq": "1", "end": "1"})]


async def test_answers_are_kept_for_a_while_and_within_a_budget(clock):
    kept = Kept(keep_for=20.0, budget=3 * Kept.OVERHEAD + 200)
    replies = []
    for n in range(3):
        reply = BusReply(Producer(), TextCompletionResponse, f"r{n}")
        if n:  # r0 never ended: nothing to keep
            await reply.send(TextCompletionResponse(end_of_stream=True), True)
        kept.add(f"r{n}", reply)
        replies.append(reply)
    assert [kept.get(f"r{n}") for n in range(3)] == [None, replies[1], replies[2]]
    await clock.advance(10.0)
    late = BusReply(Producer(), TextCompletionResponse, "r3")
    await late.send(TextCompletionResponse(response="x" * 300, end_of_stream=True), True)
    kept.add("r3", late)  # over the budget: the oldest goes
    assert [kept.get(f"r{n}") for n in (1, 2, 3)] == [None, replies[2], late]
    await clock.advance(10.0)  # r2 kept for its 20 s, r3 not yet
    assert [kept.get(f"r{n}") for n in (2, 3)] == [None, late]


async def test_in_process_a_delta_is_handed_over_and_a_record_encoded(clock):
    request = call()
    reply = LocalReply(request)
    delta = Delta("a")
    final = TextCompletionResponse(end_of_stream=True, out_token=1)
    await reply.send(delta, False)
    await reply.send(final, True)
    [(first, _), (last, is_final)] = await request.next()
    assert first is delta and last == encode(final) and is_final and reply.final
