"""A real OTLP receiver for the tests: Arize Phoenix (``arize-phoenix`` on PyPI, a
tracing server that stores spans in SQLite and serves them back over REST).

It lives in a venv of its own (``.venv-phoenix`` beside ``.venv``, made once, on
first use, with uv: ~20 s and ~700 MB): its dependencies (pandas, SQLAlchemy,
gRPC, ...) are none of the platform's business and must not decide what the
platform's venv resolves to. ``Phoenix`` starts it on free loopback ports with its
telemetry off and reads spans back through its REST API
(``GET /v1/projects/{project}/spans``)."""
import fcntl
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp

from trustgraph.pubsub.embedded import free_port

REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".venv-phoenix"
PACKAGE = "arize-phoenix==20.26.1"
READY = VENV / ".installed"
START_DEADLINE = 180.0  # its first start creates its database (~35 s on a busy machine)


def installed() -> Path:
    """Phoenix's own venv, made now if it is not there yet (one maker at a time)."""
    with open(REPO / ".venv-phoenix.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not READY.exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
            uv = Path(sys.executable).with_name("uv")
            subprocess.run([str(uv), "pip", "install", "--quiet", "--python",
                            str(VENV / "bin" / "python"), PACKAGE], check=True)
            READY.touch()
    return VENV / "bin" / "phoenix"


class Phoenix:
    def __init__(self, working_dir: Path) -> None:
        self.working_dir = working_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.log = working_dir / "phoenix.log"

    @property
    def otlp_endpoint(self) -> str:
        """What ``OTEL_EXPORTER_OTLP_ENDPOINT`` names: the exporter adds /v1/traces."""
        return self.url

    def start(self) -> "Phoenix":
        """Started, not yet ready: ``wait_ready`` (so a stack can start meanwhile)."""
        command = installed()
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("PHOENIX_",
                                                                         "OTEL_"))},
               "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(self.port),
               "PHOENIX_GRPC_PORT": str(free_port()),
               "PHOENIX_WORKING_DIR": str(self.working_dir),
               "PHOENIX_TELEMETRY_ENABLED": "false"}
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen([str(command), "serve"], env=env, stdout=log,
                                            stderr=subprocess.STDOUT)
        return self

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_DEADLINE
        while time.monotonic() < deadline:
            assert self.process is not None and self.process.poll() is None, \
                f"phoenix exited:\n{self.log.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=1) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        raise AssertionError(f"phoenix not ready in {START_DEADLINE:g} s:\n"
                             f"{self.log.read_text()[-3000:]}")

    async def spans(self, project: str, trace_id: str) -> list[dict[str, Any]]:
        """Every span of ``trace_id`` that reached the ``project``, as Phoenix's REST
        API gives them (``context``, ``parent_id``, ``name``, ``span_kind``, ...)."""
        found: list[dict[str, Any]] = []
        cursor = None
        async with aiohttp.ClientSession() as session:
            while True:
                query = {"trace_id": trace_id, "limit": "1000",
                         **({"cursor": cursor} if cursor else {})}
                async with session.get(f"{self.url}/v1/projects/{project}/spans",
                                       params=query) as answer:
                    if answer.status == 404:  # no span of the project has arrived yet
                        return []
                    assert answer.status == 200, await answer.text()
                    page = await answer.json()
                found += page["data"]
                cursor = page.get("next_cursor")
                if not cursor:
                    return found

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
