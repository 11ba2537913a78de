"""The embedded broker: a ``pulsar-lite`` child process with its data in the data dir.

Its metrics listener (0.0.0.0:8080 by default) is switched off through a config file.
It dies with the process that started it, however that one dies (a SIGKILLed
``tg-start`` used to leave it holding its port): on Linux it is started through a
few lines of Python that ask the kernel for SIGTERM on the parent's death
(``PR_SET_PDEATHSIG``) and then become the broker (``exec``), so nothing is left
between the two. The kernel's "parent" is the *thread* that started it: start it
from a thread that lives as long as the process (the main thread, an event loop's).
``pulsar-lite`` ships a Linux x86-64 binary only; elsewhere, point ``PULSAR_URL`` at an
Apache Pulsar (for example the ``apachepulsar/pulsar`` standalone container).
"""
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path

# Metrics off (its listener binds 0.0.0.0:8080 by default). The per-connection caps
# on in-flight non-persistent messages are raised from 1000: a gateway carrying many
# streams has more than that in flight when its machine is busy.
CONFIG = """\
max_concurrent_non_persistent_messages_per_connection = 100000
max_pending_publish_requests_per_connection = 100000

[metrics]
enabled = false
"""


# Run as ``python -I -S -c DIE_WITH_PARENT <parent pid> <binary> <args...>``: stdlib
# only, so it starts in ~20 ms. The parent may die before prctl takes effect: then
# the broker is not started at all.
DIE_WITH_PARENT = """\
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    sys.exit(f"the process that started the broker (pid {sys.argv[1]}) is gone")
os.execv(sys.argv[2], sys.argv[2:])
"""


class BrokerUnavailable(RuntimeError):
    pass


def broker_binary() -> str:
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise BrokerUnavailable(
            f"the embedded broker (pulsar-lite) runs on Linux x86-64 only, not "
            f"{platform.system()} {platform.machine()}. Start Apache Pulsar standalone "
            f"(docker run -p 6650:6650 apachepulsar/pulsar bin/pulsar standalone) and set "
            f"PULSAR_URL=pulsar://localhost:6650")
    try:
        from pulsar_lite.binary_finder import find_pulsar_lite_binary
    except ImportError:
        raise BrokerUnavailable("pulsar-lite is not installed (pip install pulsar-lite), "
                                "or set PULSAR_URL to an Apache Pulsar broker") from None
    return find_pulsar_lite_binary()


class EmbeddedBroker:
    def __init__(self, data_dir: str | Path, port: int = 6650, host: str = "127.0.0.1") -> None:
        self.dir = Path(data_dir).absolute() / "broker"
        self.host = host
        self.port = port
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"pulsar://{self.host}:{self.port}"

    @property
    def data_path(self) -> Path:
        """Its ``--db-path``: how a broker left running is recognised as this one."""
        return self.dir / "data"

    def start(self, timeout: float = 15.0) -> str:
        """Spawn it and wait until it listens (blocking: see ``spawn``)."""
        self.spawn()
        return self.wait_listening(timeout)

    def spawn(self) -> None:
        """Start the process (quick; the thread calling this is its kernel parent)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        config = self.dir / "pulsar-lite.toml"
        config.write_text(CONFIG)
        if _accepts(self.host, self.port):
            raise BrokerUnavailable(f"port {self.port} is already in use; stop what holds "
                                    f"it or choose another with TG_BROKER_PORT")
        argv = [broker_binary(), "--config", str(config), "--addr", f"{self.host}:{self.port}",
                "--db-path", str(self.data_path), "--log-level", "warn"]
        with open(self.dir / "broker.log", "ab") as log:
            self.process = subprocess.Popen(
                _dying_with_this_process(argv),
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                # Its own session: a terminal's Ctrl-C reaches tg-start, which stops
                # the broker last, after the processors.
                cwd=self.dir, start_new_session=True)

    def wait_listening(self, timeout: float = 15.0) -> str:
        """Wait (blocking) until the spawned broker accepts connections."""
        process = self.process
        assert process is not None, "spawn() first"
        deadline = time.monotonic() + timeout
        while not _accepts(self.host, self.port):
            if process.poll() is not None:
                raise BrokerUnavailable(f"pulsar-lite exited with {process.returncode}; "
                                        f"see {self.dir / 'broker.log'}")
            if time.monotonic() > deadline:
                self.stop()
                raise BrokerUnavailable(f"pulsar-lite did not listen on {self.port} "
                                        f"within {timeout:g} s")
            time.sleep(0.05)
        return self.url

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 5.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def kill(self) -> None:
        if self.process is not None and self.alive():
            self.process.kill()
            self.process.wait()


def _dying_with_this_process(argv: list[str]) -> list[str]:
    if not sys.platform.startswith("linux"):
        return argv
    return [sys.executable, "-I", "-S", "-c", DIE_WITH_PARENT, str(os.getpid()), *argv]


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
