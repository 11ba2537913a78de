"""The supervisor's keepers, driven with tiny real child processes."""
import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.waiting import eventually, eventually_blocking
from trustgraph.run.rundir import AlreadyRunning, RunDir, alive
from trustgraph.run.supervisor import Backoff, Child

FAST = dict(first=0.05, limit=0.2, stable=30.0)


def python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


def child(tmp_path, code: str, shutdown: asyncio.Event | None = None, **kwargs) -> Child:
    spawned = []
    kid = Child("worker", python(code), dict(os.environ), RunDir(tmp_path),
                shutdown or asyncio.Event(), backoff=Backoff(**FAST),
                on_spawn=lambda c, again: spawned.append((c.pid, again)), **kwargs)
    kid.spawned = spawned
    return kid


def test_backoff_doubles_to_its_limit_and_resets_after_a_stable_run():
    backoff = Backoff()
    assert [backoff.after(1) for _ in range(7)] == [0.5, 1, 2, 4, 8, 10, 10]
    assert backoff.after(30) == 0.5
    assert backoff.after(1) == 1


async def test_a_child_that_exits_is_restarted_with_backoff(tmp_path):
    kid = child(tmp_path, "raise SystemExit(3)")
    kid.start()
    await eventually(lambda: len(kid.spawned) >= 3, "a third spawn", timeout=10)
    await kid.stop()
    pids = [pid for pid, _ in kid.spawned]
    assert len(set(pids)) == len(pids)
    assert [again for _, again in kid.spawned][:3] == [False, True, True]
    assert kid.exits >= 2
    assert not (tmp_path / "worker.pid").exists()


async def test_stop_sends_sigterm_and_removes_the_pid_file(tmp_path):
    kid = child(tmp_path, "import time; time.sleep(60)")
    kid.start()
    await eventually((tmp_path / "worker.pid").exists, "the pid file", timeout=10)
    assert int((tmp_path / "worker.pid").read_text()) == kid.pid
    await kid.stop()
    assert kid.process.returncode == -signal.SIGTERM
    assert kid.exits == 0 and not alive(kid.pid)
    assert not (tmp_path / "worker.pid").exists()


async def test_a_child_ignoring_sigterm_is_killed_after_the_grace_period(tmp_path):
    marker = tmp_path / "ignoring"
    kid = child(tmp_path, "import pathlib, signal, sys, time\n"
                          "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                          "pathlib.Path(sys.argv[1]).touch(); time.sleep(60)", grace=0.3)
    kid.argv.append(str(marker))
    kid.start()
    await eventually(marker.exists, "the child to ignore SIGTERM", timeout=10)
    started = time.monotonic()
    await kid.stop()
    assert time.monotonic() - started >= 0.3
    assert kid.process.returncode == -signal.SIGKILL


async def test_the_childs_own_children_are_stopped_with_it(tmp_path):
    kid = child(tmp_path, "import subprocess, sys, time\n"
                          "p = subprocess.Popen([sys.executable, '-c',\n"
                          "                      'import time; time.sleep(60)'])\n"
                          "open(sys.argv[1], 'w').write(str(p.pid)); time.sleep(60)")
    grandchild = tmp_path / "grandchild"
    kid.argv.append(str(grandchild))
    kid.start()
    pid = int(await eventually(lambda: grandchild.exists() and grandchild.read_text(),
                               "the grandchild's pid", timeout=10))
    await kid.stop()
    await eventually(lambda: not alive(pid), "the grandchild to be gone", timeout=2)


async def test_nothing_is_restarted_once_shutdown_is_set(tmp_path):
    shutdown = asyncio.Event()
    kid = child(tmp_path, "import time; time.sleep(60)", shutdown)
    kid.start()
    await eventually(lambda: kid.spawned, "the spawn", timeout=10)
    shutdown.set()
    os.kill(kid.pid, signal.SIGKILL)
    await eventually(lambda: not kid.running, "the child to be gone", timeout=10)
    await asyncio.sleep(0.2)  # longer than the backoff
    assert len(kid.spawned) == 1 and kid.exits == 0
    await kid.stop()


async def test_stop_right_after_start_leaves_no_process(tmp_path):
    kid = child(tmp_path, "import time; time.sleep(60)")
    kid.start()
    await kid.stop()
    assert kid.process is None or not alive(kid.pid)


def spawn(*marker: str) -> subprocess.Popen:
    """A sleeping process, returned once its command line (with ``marker``) is in
    /proc, i.e. after its exec."""
    process = subprocess.Popen(python("import time; time.sleep(60)", "spawned", *marker))
    cmdline = Path(f"/proc/{process.pid}/cmdline")
    eventually_blocking(lambda: b"spawned" in cmdline.read_bytes(), "its exec", timeout=5,
                        every=0.005)
    return process


def test_claim_stops_leftovers_of_an_earlier_tg_start_and_nothing_else(tmp_path):
    leftover, bystander = spawn("trustgraph.run.single"), spawn()
    try:
        run_dir = RunDir(tmp_path / "run")
        run_dir.path.mkdir()
        run_dir.write_pid("prompt", leftover.pid)
        run_dir.write_pid("gateway", bystander.pid)  # pid reused by something else
        run_dir.claim()
        assert leftover.wait(5) in (-signal.SIGTERM, -signal.SIGKILL)
        assert bystander.poll() is None
        assert sorted(p.name for p in run_dir.path.iterdir()) == ["tg-start.pid"]
        assert run_dir.pid("tg-start") == os.getpid()
        run_dir.release()
        assert not run_dir.pid_file("tg-start").exists()
    finally:
        for process in (leftover, bystander):
            process.kill()
            process.wait()


def test_claim_refuses_while_another_tg_start_runs(tmp_path):
    other = spawn("tg-start")
    try:
        run_dir = RunDir(tmp_path / "run")
        run_dir.path.mkdir()
        run_dir.write_pid("tg-start", other.pid)
        with pytest.raises(AlreadyRunning, match=f"pid {other.pid}"):
            run_dir.claim()
        assert run_dir.pid("tg-start") == other.pid
    finally:
        other.kill()
        other.wait()
