"""Waiting, in a test, for what happens elsewhere (another task, a processor, a
process): one deadline, and a failure that says what was awaited.

* ``eventually``: poll a check until its result will do (a change spreading through
  the bus, a store filling up).
* ``signalled``: the same for state a test double signals with an ``asyncio.Event``
  (no polling).
* ``eventually_blocking``: ``eventually`` for a test without an event loop.
* ``answered`` / ``serving``: until a just-started service answers a request.

Absence is never waited for: to show that something did *not* happen, wait for an
event that must come after it, then look.
"""
import asyncio
import inspect
import time
import uuid
from collections.abc import Awaitable, Callable

from trustgraph.base import Requester, ServiceError, Timing

DEADLINE = 30.0  # seconds; generous, as two cores are shared by many test runs
EVERY = 0.05  # seconds between polls


class TimedOut(AssertionError):
    """The awaited condition did not hold in time."""


def _timed_out(what: str, timeout: float, last: object) -> TimedOut:
    last = repr(last)
    return TimedOut(f"timed out after {timeout:g} s waiting for {what}; last: "
                    f"{last if len(last) <= 500 else last[:500] + '…'}")


async def eventually(check: Callable[[], object], what: str = "the condition", *,
                     timeout: float = DEADLINE, accept: Callable[[object], object] = bool,
                     every: float = EVERY):
    """Call ``check()`` (plain or async) until ``accept`` holds for its result (by
    default: until it is true), and return that result."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if accept(result):
            return result
        if time.monotonic() > deadline:
            raise _timed_out(what, timeout, result)
        await asyncio.sleep(every)


async def signalled(changed: asyncio.Event, check: Callable[[], object],
                    what: str = "the condition", *, timeout: float = DEADLINE):
    """Return ``check()`` once it is true, looking again each time ``changed`` is set
    (by whoever changes what ``check`` reads)."""
    try:
        async with asyncio.timeout(timeout):
            while not (result := check()):
                changed.clear()
                await changed.wait()
    except TimeoutError:
        raise _timed_out(what, timeout, result) from None
    return result


def eventually_blocking(check: Callable[[], object], what: str = "the condition", *,
                        timeout: float = DEADLINE, every: float = EVERY):
    """``eventually`` for a plain (synchronous) test: blocks between polls."""
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            raise _timed_out(what, timeout, result)
        time.sleep(every)
    return result


async def answered(ask: Callable[[], Awaitable], what: str = "the service", *,
                   timeout: float = DEADLINE, attempt: float = 0.3):
    """``await ask()`` once a just-started service answers it (an error answer counts:
    then None). The broker drops a request that arrives while a new consumer's
    permits are on their way, so one unanswered after ``attempt`` s is sent again."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            async with asyncio.timeout(attempt):
                return await ask()
        except ServiceError:
            return None
        except TimeoutError:
            if time.monotonic() > deadline:
                raise _timed_out(f"{what} to answer", timeout, None) from None


async def serving(bus, service: str, flow: str, probe, model, *,
                  timeout: float = DEADLINE) -> None:
    """``answered`` for ``service`` on ``flow``, asked ``probe`` by a requester of its
    own."""
    requester = Requester(bus, service, flow, f"probe-{uuid.uuid4().hex[:8]}",
                          Timing(timeout=10))
    await requester.start()
    await answered(lambda: requester.call(probe, model), f"{service} on {flow}",
                   timeout=timeout)
