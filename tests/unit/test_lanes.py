"""Interactive work first (base/lanes.py): a processor's slots with a share only
interactive work may take, a lock whose interactive waiters go first, the lane a
task's work travels in, and a request's wait marked as queued."""
import asyncio

import pytest

from trustgraph.base import BULK, INTERACTIVE, LaneLock, current_lane, queued_until, set_lane
from trustgraph.base.lanes import Slots, lane_of, serving


async def holder(slots: Slots, lane, order: list, name: str, release: asyncio.Event):
    await slots.acquire(lane)
    order.append(name)
    await release.wait()
    slots.release(lane)


async def test_bulk_work_never_takes_the_reserved_slots():
    slots = Slots(4, reserved=1)
    for _ in range(3):
        await slots.acquire(BULK)
    assert not slots.available(BULK) and slots.available(INTERACTIVE)
    await asyncio.wait_for(slots.acquire(INTERACTIVE), 1)  # the reserved one
    assert slots.in_use == 4 and slots.bulk_in_use == 3


async def test_a_freed_slot_goes_to_interactive_work_first_then_bulk_in_order():
    slots, order, release = Slots(1), [], asyncio.Event()
    await slots.acquire(BULK)
    waiting = [asyncio.ensure_future(holder(slots, lane, order, name, release))
               for lane, name in ((BULK, "bulk 1"), (BULK, "bulk 2"),
                                  (INTERACTIVE, "question"))]
    await asyncio.sleep(0)  # all three wait
    release.set()
    slots.release(BULK)
    await asyncio.gather(*waiting)
    assert order == ["question", "bulk 1", "bulk 2"]
    assert slots.in_use == slots.bulk_in_use == 0


async def test_a_waiter_cancelled_as_it_is_handed_a_slot_hands_it_on():
    slots = Slots(1)
    await slots.acquire(INTERACTIVE)
    first = asyncio.ensure_future(slots.acquire(INTERACTIVE))
    second = asyncio.ensure_future(slots.acquire(BULK))
    await asyncio.sleep(0)
    slots.release(INTERACTIVE)  # handed to ``first``...
    first.cancel()  # ...which is cancelled before it runs
    await asyncio.wait_for(second, 1)
    with pytest.raises(asyncio.CancelledError):
        await first
    assert slots.in_use == slots.bulk_in_use == 1


async def test_the_lock_serves_interactive_waiters_first():
    lock, order = LaneLock(), []

    async def take(lane, name):
        set_lane(lane)
        async with lock:
            order.append(name)

    async with lock:
        waiting = [asyncio.ensure_future(take(lane, name))
                   for lane, name in ((BULK, "write 1"), (BULK, "write 2"),
                                      (INTERACTIVE, "search"))]
        await asyncio.sleep(0)
    await asyncio.gather(*waiting)
    assert order == ["search", "write 1", "write 2"]


async def test_a_task_s_lane_is_its_own_and_its_children_s():
    async def child():
        return current_lane()

    async def bulk_task():
        set_lane(BULK)
        return current_lane(), await asyncio.ensure_future(child())

    assert await asyncio.ensure_future(bulk_task()) == (BULK, BULK)
    assert current_lane() == INTERACTIVE  # the caller's own is untouched
    assert (lane_of("bulk"), lane_of(None), lane_of("anything")) == (BULK, INTERACTIVE,
                                                                    INTERACTIVE)


class Reply:
    queued = 0


async def test_a_queued_wait_is_marked_on_the_reply_until_it_ends():
    reply = Reply()

    async def serve():
        serving(reply)
        end = queued_until()
        assert reply.queued == 1
        end()
        end()  # once is enough; twice changes nothing
        assert reply.queued == 0

    await asyncio.ensure_future(serve())
    queued_until()()  # outside a request: nothing to mark
