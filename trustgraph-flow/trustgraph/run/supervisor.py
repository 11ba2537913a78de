"""Keeps the parts of a stack running: each part is a child process restarted with
backoff when it exits unexpectedly, and the embedded broker is restarted on the same
port and data if it dies (clients reconnect by themselves).

Stop order: gateway, then processors (SIGTERM, then SIGKILL after a grace period),
then the broker. Every child runs in its own session, so a Ctrl-C in the terminal
reaches tg-start alone and the parts stop in that order. Every child also dies with
tg-start if tg-start is killed: the processors ask for it themselves (``single.py``),
the broker is started asking for it (``EmbeddedBroker``), from the event loop's
thread, since the kernel's parent of a child is the thread that started it.

Once ``shutdown`` (shared by all keepers) is set, nothing is restarted any more.
"""
import asyncio
import logging
import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from trustgraph.pubsub.embedded import BrokerUnavailable, EmbeddedBroker

from .broker_watch import WedgeWatch
from .rundir import RunDir

log = logging.getLogger(__name__)

BROKER = "broker"


@dataclass
class Backoff:
    """Restart delays: ``first`` doubling up to ``limit``; back to ``first`` once the
    part had stayed up ``stable`` seconds."""

    first: float = 0.5
    limit: float = 10.0
    stable: float = 30.0

    def __post_init__(self) -> None:
        self._next = self.first

    def after(self, uptime: float) -> float:
        if uptime >= self.stable:
            self._next = self.first
        delay = self._next
        self._next = min(self._next * 2, self.limit)
        return delay


class Child:
    """One part run as ``argv`` and kept running until ``stop()``."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], run_dir: RunDir,
                 shutdown: asyncio.Event,
                 on_spawn: Callable[["Child", bool], None] = lambda child, again: None,
                 backoff: Backoff | None = None, grace: float = 5.0) -> None:
        self.name = name
        self.argv = argv
        self.env = env
        self.run_dir = run_dir
        self.process: asyncio.subprocess.Process | None = None
        self.exits = 0  # unexpected exits so far
        self._on_spawn = on_spawn
        self._backoff = backoff or Backoff()
        self._grace = grace
        self._shutdown = shutdown
        self._stop = asyncio.Event()
        self._task: asyncio.Task | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    def start(self) -> None:
        self._task = asyncio.create_task(self._keep_running(), name=f"keep {self.name}")

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task
        self.run_dir.remove(self.name)

    async def _keep_running(self) -> None:
        loop = asyncio.get_running_loop()
        again = False
        while not (self._stop.is_set() or self._shutdown.is_set()):
            started = loop.time()
            try:
                self.process = await asyncio.create_subprocess_exec(
                    *self.argv, env=self.env, stdin=asyncio.subprocess.DEVNULL,
                    start_new_session=True)
            except OSError as error:
                what = f"could not be started ({error})"
            else:
                self.run_dir.write_pid(self.name, self.process.pid)
                self._on_spawn(self, again)
                if not await _first(self.process.wait(), self._stop.wait()):
                    await self._terminate()
                    return
                if self._shutdown.is_set():
                    return
                what = f"(pid {self.process.pid}) exited with {self.process.returncode}"
            self.exits += 1
            delay = self._backoff.after(loop.time() - started)
            log.warning("%s %s; restarting in %.1f s", self.name, what, delay)
            if await _stopped_within(delay, self._stop, self._shutdown):
                return
            again = True

    async def _terminate(self) -> None:
        process = self.process
        assert process is not None  # terminated only once started
        _signal_group(process, signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), self._grace)
        except TimeoutError:
            log.warning("%s (pid %d) still running %g s after SIGTERM; killing it",
                        self.name, process.pid, self._grace)
            _signal_group(process, signal.SIGKILL)
            await process.wait()
        if process.returncode not in (0, -signal.SIGTERM, -signal.SIGKILL):
            log.info("%s (pid %d) stopped with exit code %s", self.name, process.pid,
                     process.returncode)


def _signal_group(process: asyncio.subprocess.Process, sig: int) -> None:
    """Signal the child's whole session (it leads its own process group), so nothing
    it started outlives it. Only while it is unreaped, so its pid is still its own."""
    if process.returncode is None:
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass


class BrokerKeeper:
    """The embedded broker, restarted on the same port and data if it dies.

    ``EmbeddedBroker`` is synchronous: it is spawned on the event loop's thread (the
    kernel's parent of a child is the thread that started it, and a worker thread
    may end before tg-start does), then waited for, and stopped, in a worker thread;
    its exit is watched through a pidfd, on the event loop.
    """

    def __init__(self, broker: EmbeddedBroker, run_dir: RunDir, shutdown: asyncio.Event,
                 on_spawn: Callable[[EmbeddedBroker, bool], None] = lambda b, again: None,
                 backoff: Backoff | None = None) -> None:
        self.broker = broker
        self.run_dir = run_dir
        self.exits = 0
        self._on_spawn = on_spawn
        self._backoff = backoff or Backoff()
        self._shutdown = shutdown
        self._stop = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._watch: asyncio.Task | None = None

    async def start(self) -> None:
        await self._start_broker()
        self._started(again=False)
        self._task = asyncio.create_task(self._keep_running(), name="keep broker")
        self._watch = asyncio.create_task(WedgeWatch(
            self.broker.dir / "broker.log", self._restart_wedged).run(), name="watch broker")

    async def _start_broker(self) -> None:
        self.broker.spawn()
        await asyncio.to_thread(self.broker.wait_listening)

    def _restart_wedged(self) -> None:
        if self.broker.process is not None and self.broker.process.poll() is None:
            self.broker.process.terminate()  # _keep_running starts it again

    async def stop(self) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.cancel()
        if self._task is not None:
            await self._task
        await asyncio.to_thread(self.broker.stop)
        self.run_dir.remove(BROKER)

    def _process(self) -> subprocess.Popen:
        """The broker's process: there is one from the first start on."""
        process = self.broker.process
        assert process is not None
        return process

    def _started(self, again: bool) -> None:
        self._since = asyncio.get_running_loop().time()
        self.run_dir.write_pid(BROKER, self._process().pid)
        self._on_spawn(self.broker, again)

    async def _keep_running(self) -> None:
        loop = asyncio.get_running_loop()
        while await _first(_exited(self._process()), self._stop.wait()):
            # A Ctrl-C reaches the broker too; let tg-start's own signal land first.
            if await _stopped_within(0.1, self._shutdown, self._stop):
                return
            self.exits += 1
            code = self._process().poll()
            delay = self._backoff.after(loop.time() - self._since)
            log.warning("broker (pid %d) exited with %s; restarting it in %.1f s on %s",
                        self._process().pid, code, delay, self.broker.url)
            while True:
                if await _stopped_within(delay, self._shutdown, self._stop):
                    return
                try:
                    await self._start_broker()
                    break
                except BrokerUnavailable as error:
                    delay = self._backoff.after(0)
                    log.error("broker restart failed: %s; retrying in %.1f s", error, delay)
            self._started(again=True)


def _settle(exited: asyncio.Future) -> None:
    if not exited.done():
        exited.set_result(None)


async def _exited(process: subprocess.Popen) -> None:
    """Wait for the (unreaped) ``process`` to exit: through a pidfd, without a thread
    or polling, where the kernel has them (Linux 5.3+)."""
    loop = asyncio.get_running_loop()
    try:
        fd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):
        while process.poll() is None:
            await asyncio.sleep(0.2)
        return
    exited = loop.create_future()
    loop.add_reader(fd, _settle, exited)
    try:
        await exited
    finally:
        loop.remove_reader(fd)
        os.close(fd)


async def _first(exits, stop) -> bool:
    """True if ``exits`` finished first, False if ``stop`` did."""
    exit_task, stop_task = asyncio.ensure_future(exits), asyncio.ensure_future(stop)
    await asyncio.wait({exit_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
    for task in (exit_task, stop_task):
        task.cancel()
    await asyncio.gather(exit_task, stop_task, return_exceptions=True)
    return exit_task.done() and not exit_task.cancelled()


async def _stopped_within(delay: float, *events: asyncio.Event) -> bool:
    """Wait ``delay`` seconds; True as soon as one of ``events`` is set."""
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    done, pending = await asyncio.wait(waits, timeout=delay,
                                       return_when=asyncio.FIRST_COMPLETED)
    for wait in pending:
        wait.cancel()
    return bool(done)
