"""Processes in the way of a start: what an earlier ``tg-start`` on the same data dir
left running, and whoever holds a port the new one needs.

Nothing should be left: every child asks the kernel to be signalled when tg-start
dies. But a kernel's parent-death signal only reaches a direct child whose parent
*died*; a part that ignored its SIGTERM, a grandchild in its own session, or a
process started by hand with the data dir's settings can still be there. So a start
looks for them (Linux: ``/proc``), and stops what is recognisably this data dir's:

* the embedded broker of this data dir: ``--db-path <data dir>/broker/data``;
* a process started under a tg-start of this data dir (its environment has
  ``TG_SUPERVISOR_PID``, which only tg-start sets, and ``TG_DATA_DIR``), whose
  tg-start is no longer running.

Anything else holding a port is only named, with how to free the port.
"""
import logging
import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

PROC = Path("/proc")
LISTEN = "0A"  # a TCP socket's state in /proc/net/tcp: listening


@dataclass(frozen=True)
class Running:
    pid: int
    argv: tuple[str, ...]

    def __str__(self) -> str:
        command = " ".join(self.argv)
        return f"pid {self.pid} ({command[:200]}{'...' if len(command) > 200 else ''})"


def _processes() -> Iterator[Running]:
    if not sys.platform.startswith("linux"):
        return
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (found := running(int(entry.name))):
            yield found


def running(pid: int) -> Running | None:
    """The process ``pid`` if it is alive (not a zombie), with its command line."""
    try:
        argv = (PROC / str(pid) / "cmdline").read_bytes().split(b"\0")
        state = (PROC / str(pid) / "stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return None
    if state == "Z" or not argv[0]:
        return None  # a zombie, or a kernel thread
    return Running(pid, tuple(arg.decode(errors="replace") for arg in argv if arg))


def _environment(pid: int) -> dict[str, str]:
    try:
        raw = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return {}  # another user's, or gone
    pairs = (item.decode(errors="replace").partition("=") for item in raw.split(b"\0"))
    return {key: value for key, _, value in pairs if key}


def _same_path(a: str | Path, b: str | Path) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


def left_by_earlier_start(data_dir: Path, alive_supervisor: int | None = None
                          ) -> list[Running]:
    """The processes a tg-start on ``data_dir`` left behind: its broker, and what it
    started (and they started) while its own tg-start is gone. ``alive_supervisor``:
    a tg-start known to be running (its children are not leftovers)."""
    broker_data = data_dir / "broker" / "data"
    own = {os.getpid(), os.getppid()}
    found = []
    for process in _processes():
        if process.pid in own:
            continue
        db_path = _flag(process.argv, "--db-path")
        if db_path and _same_path(db_path, broker_data):
            found.append(process)
            continue
        environment = _environment(process.pid)
        supervisor = environment.get("TG_SUPERVISOR_PID", "")
        if (supervisor.isdigit() and int(supervisor) not in own | {alive_supervisor}
                and _same_path(environment.get("TG_DATA_DIR", ""), data_dir)
                and not _is_tg_start(int(supervisor))):
            found.append(process)
    return found


def _is_tg_start(pid: int) -> bool:
    process = running(pid)
    return process is not None and any("tg-start" in arg or "trustgraph.run.start" in arg
                                       for arg in process.argv[:3])


def _flag(argv: tuple[str, ...], name: str) -> str | None:
    for flag, value in zip(argv, argv[1:], strict=False):
        if flag == name:
            return value
    return None


def holding(port: int) -> Running | None:
    """The process listening on TCP ``port`` (any address), if this user may see it."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    for process in _processes():
        try:
            for fd in (PROC / str(process.pid) / "fd").iterdir():
                if os.readlink(fd) in inodes:
                    return process
        except OSError:
            continue  # another user's, or gone meanwhile
    return None


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == LISTEN and int(local.rpartition(":")[2], 16) == port:
                inodes.add(f"socket:[{inode}]")
    return inodes


def stop(process: Running, grace: float = 5.0) -> None:
    """SIGTERM, then SIGKILL if it is still there after ``grace`` seconds; returns
    once it is gone. (Before tg-start's event loop runs: nothing else to serve.)"""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.kill(process.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if _exited(process.pid):
                return
            time.sleep(0.02)
    log.warning("%s did not exit", process)


def _exited(pid: int) -> bool:
    """Whether ``pid`` has let go of everything it held. Its command line empties,
    and its main thread turns zombie, before the process's last thread closes its
    files (its listening sockets among them); only a zombie with no other thread
    left has closed them all."""
    try:
        fields = (PROC / str(pid) / "stat").read_text().rpartition(")")[2].split()
    except OSError:
        return True  # reaped
    state, threads = fields[0], int(fields[17])
    return state in ("Z", "X") and threads <= 1
