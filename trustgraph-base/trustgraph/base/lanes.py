"""Interactive work first (DESIGN §9): which lane work travels in, and the waits
that honour it.

A question's own work (its embedding, searches, subgraph, LLM call) is
*interactive*; a load's (every pipeline stage, and every request a stage makes) is
*bulk*. The lane travels with a request as the message property ``lane`` (``bulk``;
absent means interactive, so a requester that knows nothing of lanes is served
first) and, inside a process, in a context variable: a stage handler runs in the
bulk lane, a service handler in its request's lane, and every request a handler
makes goes in the lane it runs in. So chunk-embeddings' requests to the embeddings
service are bulk and a RAG service's are interactive, without either saying so.

Where work waits for something shared, it waits by lane, interactive first:

* ``Slots``: a processor's ``TG_CONCURRENCY`` requests and stage records at once,
  of which ``TG_INTERACTIVE_SLOTS`` bulk work never takes, so a question finds a
  slot free however deep a load's backlog;
* ``LaneLock``: one at a time (a store's one connection), interactive waiters first;
* the embeddings model's queue (``embeddings/minilm/batcher.py``);
* the CPU, inside a process: the embeddings model's bulk runs go on threads of
  lower priority (``lower_thread_priority``), so a question's run takes the
  process's share of the cores first. Not whole processes: where the kernel groups
  each session (tg-start starts each process in a session of its own) a process's
  nice counts against other processes only through its group, and a stage starved
  that way holds up the loads that wait on it.

A request that waits in such a queue says so to its requester (``queued_until``):
its keep-alives carry ``queued``, and a requester does not count the wait against
``TG_REQUEST_TIMEOUT``. A busy service is then told apart from a dead one by its
keep-alives alone: they stop only when the process does.
"""
import asyncio
import os
import sys
import threading
from collections import deque
from collections.abc import Callable
from contextvars import ContextVar
from typing import Literal, Protocol

Lane = Literal["interactive", "bulk"]
INTERACTIVE: Lane = "interactive"
BULK: Lane = "bulk"
LANE = "lane"  # the request's message property: "bulk", or absent

BULK_NICE = 10  # a bulk thread's nice, above its process's: ~1/10 of a default thread's share
MAX_NICE = 19

_lane: ContextVar[Lane] = ContextVar("tg_lane", default=INTERACTIVE)


def current_lane() -> Lane:
    """The lane of the work this task does (interactive unless set)."""
    return _lane.get()


def set_lane(lane: Lane) -> None:
    """This task's work, and every request it makes, goes in ``lane`` from now on.
    A runner sets it at the start of the task that serves one request or record; a
    handler doing bulk work for an interactive caller (re-embedding a collection)
    may set it too."""
    _lane.set(lane)


def lane_of(value: str | None) -> Lane:
    """The lane a request's ``lane`` property names (anything but "bulk": interactive)."""
    return BULK if value == BULK else INTERACTIVE


class _Waiters:
    """Futures waiting for a turn, a queue per lane."""

    def __init__(self) -> None:
        self.queues: dict[Lane, deque[asyncio.Future]] = {INTERACTIVE: deque(), BULK: deque()}

    def __bool__(self) -> bool:
        return any(self.queues.values())

    async def wait(self, lane: Lane, handed_back: Callable[[], None]) -> None:
        """Until a releaser hands this waiter its turn; ``handed_back`` gives a turn
        handed over just as the wait was cancelled to the next waiter."""
        future = asyncio.get_running_loop().create_future()
        self.queues[lane].append(future)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                handed_back()
            else:
                try:
                    self.queues[lane].remove(future)
                except ValueError:
                    pass
            raise

    def hand(self, lane: Lane) -> bool:
        """Wakes the first live waiter of ``lane``; False when there is none."""
        queue = self.queues[lane]
        while queue:
            future = queue.popleft()
            if not future.done():
                future.set_result(None)
                return True
        return False


class Slots:
    """``limit`` slots shared by a processor's runners, of which ``reserved`` only
    interactive work may take. A slot freed goes to the oldest interactive waiter,
    else to the oldest bulk one that bulk's share allows."""

    def __init__(self, limit: int, reserved: int = 0) -> None:
        self.limit = max(0, limit)  # 0: takes nothing (a replica held back on purpose)
        # bulk keeps at least one slot whatever is reserved, or a load would never run
        self.bulk_limit = min(self.limit, max(1, self.limit - max(0, reserved)))
        self.in_use = 0
        self.bulk_in_use = 0
        self._waiters = _Waiters()

    def _free(self, lane: Lane) -> bool:
        return self.in_use < self.limit and (lane == INTERACTIVE
                                             or self.bulk_in_use < self.bulk_limit)

    def available(self, lane: Lane) -> bool:
        """Whether ``acquire(lane)`` would take a slot at once."""
        ahead = self._waiters.queues[INTERACTIVE] or (lane == BULK
                                                      and self._waiters.queues[BULK])
        return self._free(lane) and not ahead

    async def acquire(self, lane: Lane) -> None:
        if self.available(lane):
            self._take(lane)
            return
        # A slot handed over is taken (counted) by the releaser, for this waiter.
        await self._waiters.wait(lane, lambda: self.release(lane))

    def release(self, lane: Lane) -> None:
        self.in_use -= 1
        if lane == BULK:
            self.bulk_in_use -= 1
        for waiting in (INTERACTIVE, BULK):
            while self._free(waiting) and self._waiters.queues[waiting]:
                self._take(waiting)
                if not self._waiters.hand(waiting):
                    self._untake(waiting)

    def _take(self, lane: Lane) -> None:
        self.in_use += 1
        if lane == BULK:
            self.bulk_in_use += 1

    def _untake(self, lane: Lane) -> None:
        self.in_use -= 1
        if lane == BULK:
            self.bulk_in_use -= 1


class LaneLock:
    """A lock whose waiters are served interactive first, then in arrival order:
    a store's one connection, which a question's search must not wait behind a
    load's queue of writes for (only behind the call under way)."""

    def __init__(self) -> None:
        self._held = False
        self._waiters = _Waiters()

    async def __aenter__(self) -> None:
        if not self._held and not self._waiters:
            self._held = True
            return
        await self._waiters.wait(current_lane(), self._release)

    async def __aexit__(self, *exc_info: object) -> None:
        self._release()

    def _release(self) -> None:
        if not (self._waiters.hand(INTERACTIVE) or self._waiters.hand(BULK)):
            self._held = False


class Waiting(Protocol):
    """What ``queued_until`` marks: the reply of the request being served."""

    queued: int


_serving: ContextVar[Waiting | None] = ContextVar("tg_serving", default=None)


def serving(reply: Waiting) -> None:
    """This task serves the request answered through ``reply`` (set by the runner)."""
    _serving.set(reply)


def queued_until() -> Callable[[], None]:
    """The request this task serves waits in a queue of its service (the model's
    queue, say) until the returned function is called (once or more). Meanwhile its
    keep-alives say ``queued``, and its requester does not count the wait against
    ``TG_REQUEST_TIMEOUT``. Outside a request it marks nothing."""
    reply = _serving.get()
    if reply is None:
        return _nothing
    reply.queued += 1
    ended = False

    def end() -> None:
        nonlocal ended
        if not ended:
            ended = True
            reply.queued -= 1
    return end


def _nothing() -> None:
    pass


def lower_thread_priority() -> None:
    """The calling thread's nice raised by ``BULK_NICE``, as ``os.nice`` raises a
    process's. Linux only: there a thread has a nice of its own; elsewhere
    setpriority would lower the whole process."""
    if sys.platform == "linux":
        thread = threading.get_native_id()
        nice = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(MAX_NICE, nice + BULK_NICE))
