"""What a child of tg-start does on its own side (``tg-run`` under a supervisor):
it says when it serves, and it never outlives its supervisor."""
import os
import subprocess
import sys
from pathlib import Path

from tests.support.waiting import eventually_blocking
from trustgraph.run.rundir import alive

TG_RUN = str(Path(sys.executable).with_name("tg-run"))

# A stand-in supervisor: starts the command in argv as its child, as tg-start does.
SUPERVISOR = """
import os, subprocess, sys, time
env = dict(os.environ, TG_SUPERVISOR_PID=str(os.getpid()))
child = subprocess.Popen(sys.argv[2:], env=env)
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(60)
"""


def test_a_child_announces_that_it_serves_and_dies_with_its_supervisor(broker, tmp_path):
    ready, pid_file = tmp_path / "text-completion.ready", tmp_path / "child.pid"
    # An LLM named (never called): with none, text-completion would load the local
    # model as it starts, CPU this test of a child's lifetime has no use for.
    env = dict(os.environ, PULSAR_URL=broker.url, TG_READY_FILE=str(ready),
               TG_LLM="openai", OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    supervisor = subprocess.Popen([sys.executable, "-c", SUPERVISOR, str(pid_file),
                                   TG_RUN, "text-completion"], env=env)
    try:
        eventually_blocking(ready.exists, "the ready file", timeout=20)
        child = int(pid_file.read_text())
        supervisor.kill()  # SIGKILL: no chance to stop its child itself
        supervisor.wait()
        eventually_blocking(lambda: not alive(child), "the child to follow its supervisor",
                            timeout=10)
    finally:
        supervisor.kill()
        supervisor.wait()


def test_a_child_whose_supervisor_is_already_gone_does_not_start(broker):
    env = dict(os.environ, PULSAR_URL=broker.url, TG_SUPERVISOR_PID="1")
    result = subprocess.run([TG_RUN, "text-completion"], env=env, capture_output=True,
                            text=True, timeout=30)
    assert result.returncode != 0
    assert "tg-start (pid 1) is gone; not starting" in result.stderr
