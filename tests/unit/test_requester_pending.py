"""The per-request buffer of the requester: ordering, batching, lost records."""
import asyncio

import pytest

from trustgraph.base.requester import MAX_PENDING_RESPONSES, Pending, ServiceError


async def test_batches_whatever_has_arrived_in_order():
    pending = Pending()
    for seq in range(3):
        pending.put((b"%d" % seq, seq == 2), seq)
    assert await pending.batch(1) == [(b"0", False), (b"1", False), (b"2", True)]


async def test_waits_for_the_first_frame():
    pending = Pending()
    waiting = asyncio.create_task(pending.batch(5))
    await asyncio.sleep(0)
    assert not waiting.done()
    pending.put((b"x", True), 0)
    assert await waiting == [(b"x", True)]


async def test_a_gap_in_sequence_fails_after_the_frames_before_it():
    pending = Pending()
    pending.put((b"a", False), 0)
    pending.put((b"c", False), 2)  # 1 was lost
    pending.put((b"d", True), 3)
    assert await pending.batch(1) == [(b"a", False)]
    with pytest.raises(ServiceError) as failure:
        await pending.batch(1)
    assert failure.value.error.type == "responses-lost"


async def test_records_without_seq_are_accepted_from_old_senders():
    pending = Pending()
    pending.put((b"a", False), None)
    pending.put((b"b", True), None)
    assert len(await pending.batch(1)) == 2


async def test_a_reader_that_never_reads_overflows_instead_of_growing():
    pending = Pending()
    for seq in range(MAX_PENDING_RESPONSES + 1):
        pending.put((b"x", False), seq)
    assert len(await pending.batch(1)) == MAX_PENDING_RESPONSES
    with pytest.raises(ServiceError, match="overflow"):
        await pending.batch(1)


async def test_times_out_when_nothing_arrives():
    with pytest.raises(TimeoutError):
        await Pending().batch(0.01)


async def test_the_accepted_marker_wakes_the_reader_with_nothing_to_read():
    pending = Pending()
    waiting = asyncio.create_task(pending.batch(5))
    await asyncio.sleep(0)
    pending.accept()
    assert await waiting == []
    assert pending.accepted


async def test_each_wait_has_its_own_deadline_though_one_timer_checks_them():
    """Frames every 30 ms against a 50 ms deadline per wait: never a timeout, though
    the first wait's deadline passes long before the stream ends; then silence is."""
    pending = Pending()

    async def every_30_ms():
        for seq in range(6):
            await asyncio.sleep(0.03)
            pending.put((b"x", False), seq)

    sender = asyncio.create_task(every_30_ms())
    got = 0
    while got < 6:
        got += len(await pending.batch(0.05))
    await sender
    with pytest.raises(TimeoutError):
        await pending.batch(0.05)
    pending.close()


async def test_a_deadline_that_passed_while_nobody_waited_fails_no_later_wait():
    pending = Pending()
    pending.put((b"a", False), 0)
    assert await pending.batch(0.01) == [(b"a", False)]
    waiting = asyncio.create_task(pending.batch(0.01))
    await asyncio.sleep(0)
    pending.put((b"b", False), 1)
    assert await waiting == [(b"b", False)]
    await asyncio.sleep(0.03)  # that wait's deadline passes with nobody waiting
    waiting = asyncio.create_task(pending.batch(5))
    await asyncio.sleep(0)
    pending.accept()  # wakes the reader with nothing to read: not a timeout
    assert await waiting == []
    pending.close()
