"""The whole platform started with ``tg-start``, as a user starts it, for end-to-end
tests.

    with openai_server_thread() as llm, Stack(env={"OPENAI_BASE_URL": llm.base_url}) as stack:
        ...  # talk to stack.websocket_url / stack.gateway_url / stack.broker_url
        old = stack.kill("text-completion")             # SIGKILL by default
        stack.wait_restarted("text-completion", old)    # and serving again

``Stack`` gets a fresh data dir, free ports, and an environment scrubbed of the
host's platform and LLM variables plus the ``env`` you pass. Entering waits (polling,
with a deadline) for tg-start's ``ready`` line, which comes once the gateway accepts
connections and every processor serves. Leaving sends SIGTERM and asserts that
tg-start exited 0 and left no process behind. On any failure the combined output of
tg-start and its children is printed (pytest shows it with the failure).

The waits block; in an ``async`` test use ``async with Stack(...)`` and
``await asyncio.to_thread(stack.wait_restarted, ...)``, or run the LLM server with
``openai_server_thread`` so that nothing the stack needs lives on the test's loop.
"""
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.openai_server import OpenAiServer, Script
from tests.support.waiting import TimedOut, eventually_blocking
from trustgraph.pubsub.embedded import free_port
from trustgraph.run.rundir import alive

TG_START = Path(sys.executable).with_name("tg-start")
READY = "tg-start: ready"
# Host variables that would change what the stack runs or which LLM it calls.
SCRUBBED_PREFIXES = ("TG_", "PULSAR_", "OPENAI_", "ANTHROPIC_", "OLLAMA_", "AZURE_",
                     "AWS_", "GOOGLE_", "GEMINI_", "VERTEX", "COHERE_", "MISTRAL_",
                     "NEO4J_", "QDRANT_", "LAZY_RAG_", "OTEL_")


class Stack:
    def __init__(self, env: dict[str, str] | None = None, processors: list[str] | None = None,
                 token: str = "", startup_timeout: float = 90.0,
                 data_dir: Path | None = None) -> None:
        """``processors``: TG_PROCESSORS (default: tg-start's own stack);
        ``token``: TG_GATEWAY_TOKEN (default: an open gateway). ``startup_timeout``
        only bounds a failing start: the default stack took over 30 s to be ready on
        a loaded 2-core machine. ``data_dir``: a data dir to use and keep (a
        benchmark's loaded corpus); by default a fresh one, removed on close."""
        self.keep_data = data_dir is not None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="tg-stack-"))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.broker_port = free_port()
        self.gateway_port = free_port()
        self.token = token
        self.startup_timeout = startup_timeout
        self.env = _scrubbed(os.environ) | {
            "TG_DATA_DIR": str(self.data_dir),
            "TG_BROKER_PORT": str(self.broker_port),
            "TG_GATEWAY_HOST": "127.0.0.1",
            "TG_GATEWAY_PORT": str(self.gateway_port),
        }
        if processors is not None:
            self.env["TG_PROCESSORS"] = ",".join(processors)
        if token:
            self.env["TG_GATEWAY_TOKEN"] = token
        self.env |= env or {}
        self.process: subprocess.Popen | None = None
        self._seen_pids: set[int] = set()

    # -- where things are -------------------------------------------------------

    @property
    def gateway_url(self) -> str:
        return f"http://127.0.0.1:{self.gateway_port}/"

    @property
    def websocket_url(self) -> str:
        return f"ws://127.0.0.1:{self.gateway_port}/api/v1/socket"

    @property
    def broker_url(self) -> str:
        return self.env.get("PULSAR_URL") or f"pulsar://127.0.0.1:{self.broker_port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "tg-start.log"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def pid(self, name: str) -> int:
        """The pid of a running part: ``broker``, ``gateway``, a processor, ``tg-start``."""
        pid = self.pid_or_none(name)
        assert pid is not None, f"no pid file for {name!r}; running: {sorted(self.pids())}"
        return pid

    def pid_or_none(self, name: str) -> int | None:
        try:
            pid = int((self.data_dir / "run" / f"{name}.pid").read_text())
        except (OSError, ValueError):
            return None
        self._seen_pids.add(pid)
        return pid

    def pids(self) -> dict[str, int]:
        run = self.data_dir / "run"
        found = {p.stem: self.pid_or_none(p.stem) for p in run.glob("*.pid")}
        return {name: pid for name, pid in found.items() if pid is not None}

    def serving(self, name: str) -> bool:
        """Whether that part answers: the gateway accepts, a processor is subscribed."""
        if name == "gateway":
            return _accepts(self.gateway_port)
        if name == "broker":
            return _accepts(self.broker_port)
        return (self.data_dir / "run" / f"{name}.ready").exists()

    # -- doing things to it -----------------------------------------------------

    def kill(self, name: str, sig: int = signal.SIGKILL) -> int:
        """Signal one part; returns the pid signalled."""
        pid = self.pid(name)
        os.kill(pid, sig)
        return pid

    def wait_restarted(self, name: str, old_pid: int, timeout: float = 20.0) -> int:
        """Wait until tg-start has replaced ``old_pid`` and the new one serves."""
        def restarted() -> int | None:
            pid = self.pid_or_none(name)
            if pid not in (None, old_pid) and alive(pid) and self.serving(name):
                return pid
            return None
        return self.wait_for(restarted, timeout, f"{name} (was pid {old_pid}) to restart")

    def wait_for(self, check: Callable[[], object], timeout: float, what: str) -> object:
        """Poll ``check`` until it returns something true; fail with the log after
        ``timeout`` seconds or if tg-start exits."""
        def done() -> object:
            if self.process is not None and self.process.poll() is not None:
                self._fail(f"tg-start exited with {self.process.returncode} while "
                           f"waiting for {what}")
            return check()
        try:
            return eventually_blocking(done, what, timeout=timeout)
        except TimedOut as error:
            self._fail(str(error))

    def start(self) -> "Stack":
        """Launch tg-start and wait for its ready line."""
        seen = self.log().count(READY)  # the log is appended to across launches
        self.launch()
        self.wait_for(lambda: self.log().count(READY) > seen, self.startup_timeout,
                      "the ready line")
        self.pids()
        return self

    def launch(self, *args: str) -> subprocess.Popen:
        """Launch tg-start (with extra flags ``args``) without waiting for anything."""
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [str(TG_START), *args], env=self.env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)  # its own process group, like a terminal job
        return self.process

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        """Signal tg-start (SIGTERM; SIGINT to its process group is ``interrupt``),
        wait for it, and return its exit code after checking nothing is left."""
        if self.process.poll() is None:
            self.pids()
            self.process.send_signal(sig)
        return self._wait_stopped(timeout)

    def interrupt(self, timeout: float = 20.0) -> int:
        """What Ctrl-C in a terminal does: SIGINT to tg-start's process group."""
        self.pids()
        os.killpg(self.process.pid, signal.SIGINT)
        return self._wait_stopped(timeout)

    def _wait_stopped(self, timeout: float) -> int:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self._fail(f"tg-start did not exit within {timeout:g} s")
        left = self.leftovers()
        if left:
            self._fail(f"processes left behind by tg-start: {left}")
        return code

    def leftovers(self, timeout: float = 2.0) -> list[int]:
        deadline = time.monotonic() + timeout
        while (left := [p for p in sorted(self._seen_pids) if alive(p)]) \
                and time.monotonic() < deadline:
            time.sleep(0.02)
        return left

    def _fail(self, message: str) -> None:
        raise AssertionError(f"{message}\n--- tg-start output ({self.log_path}) ---\n"
                             f"{self.log()}")

    def close(self, failed: bool = False) -> None:
        try:
            if failed:
                print(self.log(), file=sys.stderr)
            if self.process is not None and self.process.poll() is None:
                code = self.stop()
                if not failed:
                    assert code == 0, f"tg-start exited with {code}\n{self.log()}"
        finally:
            self._kill_everything()
            if not self.keep_data:
                shutil.rmtree(self.data_dir, ignore_errors=True)

    def _kill_everything(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for pid in self._seen_pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)

    def __enter__(self) -> "Stack":
        try:
            return self.start()
        except BaseException:
            self._kill_everything()
            raise

    def __exit__(self, kind, error, traceback) -> None:
        self.close(failed=kind is not None)

    async def __aenter__(self) -> "Stack":
        return await asyncio.to_thread(self.__enter__)

    async def __aexit__(self, kind, error, traceback) -> None:
        await asyncio.to_thread(self.__exit__, kind, error, traceback)


@contextmanager
def openai_server_thread(script: Script | None = None,
                         server_class: type[OpenAiServer] = OpenAiServer
                         ) -> Iterator[OpenAiServer]:
    """The local OpenAI-format server (or a subclass) on a thread of its own, so it
    answers while the test blocks (on a subprocess, a sync client, or a ``Stack`` wait)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="openai-server", daemon=True)
    thread.start()

    async def started() -> OpenAiServer:
        return await server_class(script).start()

    server = asyncio.run_coroutine_threadsafe(started(), loop).result(10)
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def _scrubbed(environ: os._Environ | dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in environ.items() if not k.startswith(SCRUBBED_PREFIXES)}


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False

