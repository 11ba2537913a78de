"""A processor's state record (``schema/state.py``), sent every ``TG_STATE_PERIOD``
seconds on the state topic: what it serves, what it has in hand, its process's last
warning, and its stores' own checks.

Cheap on purpose: one small record per processor per period (a few hundred bytes;
built from counters the processor keeps anyway), and a store check (a read and a
write taken back) at most every ``STORE_CHECK_PERIOD``.
"""
import asyncio
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..pubsub import Bus
from ..pubsub.bus import Producer
from ..schema.state import LastError, ProcessorState, StoreCheck
from ..schema.topics import STATE_TOPIC

log = logging.getLogger(__name__)

STORE_CHECK_PERIOD = 30.0  # seconds between two checks of a store
LAST_SEND = 1.0  # seconds a stopping process waits to say so
# A store's check: a read (raising ``StoreUnreadable`` if it fails), then a write it
# takes back (raising anything if that fails).
StoreProbe = Callable[[], Awaitable[None]]


class StoreUnreadable(Exception):
    """A store check's read failed (a write is then not tried)."""


@dataclass
class StoreCheckRunner:
    store: str
    probe: StoreProbe
    last: StoreCheck | None = None

    async def checked(self) -> StoreCheck:
        """The latest check, made again once it is ``STORE_CHECK_PERIOD`` old."""
        if self.last is not None and time.time() - self.last.time < STORE_CHECK_PERIOD:
            return self.last
        try:
            await self.probe()
            self.last = StoreCheck(store=self.store, readable=True, writable=True,
                                   time=time.time())
        except StoreUnreadable as error:
            self.last = StoreCheck(store=self.store, readable=False, writable=False,
                                   message=str(error), time=time.time())
        except Exception as error:
            self.last = StoreCheck(store=self.store, readable=True, writable=False,
                                   message=f"{type(error).__name__}: {error}",
                                   time=time.time())
        return self.last


class LastWarning(logging.Handler):
    """The last WARNING-or-worse line this process logged: a state record's
    ``last_error`` (one per process: the members of a process group share it)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: LastError | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = f"{record.name}: {record.getMessage()}"[:500]
        except Exception:  # a bad format string: keep what can be kept
            message = str(record.msg)[:500]
        self.last = LastError(time=record.created, message=message)


_warnings: LastWarning | None = None


def last_warnings() -> LastWarning:
    """The process's one ``LastWarning`` handler, installed on first use."""
    global _warnings
    if _warnings is None:
        _warnings = LastWarning()
        logging.getLogger().addHandler(_warnings)
    return _warnings


class StatePublisher:
    """Sends ``state()`` (the processor's record, without its stores) every
    ``period`` seconds, with its stores' checks added."""

    def __init__(self, bus: Bus, state: Callable[[], ProcessorState], period: float) -> None:
        self._bus = bus
        self._state = state
        self.period = period
        self.stores: list[StoreCheckRunner] = []
        self._producer: Producer | None = None
        self._warnings = last_warnings()

    def check_store(self, store: str, probe: StoreProbe) -> None:
        self.stores.append(StoreCheckRunner(store, probe))

    def record(self) -> ProcessorState:
        state = self._state()
        state.period, state.pid, state.host = self.period, os.getpid(), _HOST
        state.last_error = self._warnings.last
        return state

    async def send(self, up: bool = True) -> None:
        """One record now; a failure to send is logged at DEBUG (the broker away: the
        next period tries again; a warning would itself become the last error). The
        last one (``up`` false) waits ``LAST_SEND`` at most: a process stopping
        because the broker went away must not wait out the send timeout."""
        state = self.record()
        state.up = up
        if up:
            state.stores = [await runner.checked() for runner in self.stores]
        try:
            await asyncio.wait_for(self._send(state), None if up else LAST_SEND)
        except Exception as error:
            log.debug("state record not sent: %s", error)

    async def _send(self, state: ProcessorState) -> None:
        if self._producer is None:
            self._producer = await self._bus.producer(STATE_TOPIC)
        await self._producer.send(state.encoded())

    async def run(self) -> None:
        while True:
            await self.send()
            await asyncio.sleep(self.period)


_HOST = socket.gethostname()
