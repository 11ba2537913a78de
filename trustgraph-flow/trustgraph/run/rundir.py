"""``TG_DATA_DIR/run``: where operators and tests find what a tg-start runs.

``<name>.pid`` holds the pid of each running part (``broker``, ``gateway``, each
processor, and ``tg-start`` itself); ``<name>.ready`` appears once a processor serves.
"""
import logging
import os
import sys
from pathlib import Path

from .leftovers import Running, left_by_earlier_start, running, stop

log = logging.getLogger(__name__)

SUPERVISOR = "tg-start"
# How a leftover of an earlier tg-start is recognised in /proc/<pid>/cmdline.
CHILD_MARKERS = ("trustgraph.run.single", "pulsar-lite")
SUPERVISOR_MARKERS = ("tg-start", "trustgraph.run.start")


class AlreadyRunning(RuntimeError):
    pass


class RunDir:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def pid_file(self, name: str) -> Path:
        return self.path / f"{name}.pid"

    def ready_file(self, name: str) -> Path:
        return self.path / f"{name}.ready"

    def write_pid(self, name: str, pid: int) -> None:
        self.ready_file(name).unlink(missing_ok=True)
        self.pid_file(name).write_text(f"{pid}\n")

    def pid(self, name: str) -> int | None:
        try:
            return int(self.pid_file(name).read_text())
        except (OSError, ValueError):
            return None

    def remove(self, name: str) -> None:
        self.pid_file(name).unlink(missing_ok=True)
        self.ready_file(name).unlink(missing_ok=True)

    def claim(self) -> None:
        """Become this data dir's tg-start: refuse if another one is running, and
        stop what an earlier one left behind (leftovers.py)."""
        self.path.mkdir(parents=True, exist_ok=True)
        other = self.pid(SUPERVISOR)
        if other and other != os.getpid() and _runs(other, SUPERVISOR_MARKERS):
            raise AlreadyRunning(f"another tg-start (pid {other}) is running with data "
                                 f"dir {self.path.parent}; stop it or use another "
                                 f"TG_DATA_DIR")
        names = {pid: name for name in self._names() if (pid := self.pid(name))}
        found = {p.pid: p for p in left_by_earlier_start(self.path.parent)}
        for pid, name in names.items():  # also where /proc cannot say (not Linux)
            if name != SUPERVISOR and pid not in found and _runs(pid, CHILD_MARKERS):
                found[pid] = Running(pid, (name,))
        for pid, process in found.items():
            log.warning("stopping %s (%s) left over from an earlier tg-start",
                        names.get(pid, "a process"), process)
            stop(process, grace=2.0)
        for name in self._names():
            self.remove(name)
        self.pid_file(SUPERVISOR).write_text(f"{os.getpid()}\n")

    def _names(self) -> list[str]:
        return sorted(pid_file.stem for pid_file in self.path.glob("*.pid"))

    def release(self) -> None:
        self.remove(SUPERVISOR)


def _runs(pid: int, markers: tuple[str, ...]) -> bool:
    """Whether ``pid`` is alive and its command line has one of ``markers`` (a pid
    file can outlive its process, and the pid can be reused by something else)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    return any(marker in cmdline for marker in markers)


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and has not exited (Linux: reads /proc)."""
    return running(pid) is not None
