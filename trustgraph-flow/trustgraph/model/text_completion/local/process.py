"""The local model's server process, kept running by the provider that uses it.

Started on first use (the provider asks for it as soon as it is made, so the model
loads while the stack starts), restarted on the next request after it dies (a
crash or the kernel's OOM killer: a GGUF too big for the machine dies here, not in
the processors' own process). A start that fails is remembered for a few seconds,
so a broken model answers every request with its reason instead of a new process
per request.
"""
import asyncio
import json
import logging
import os
import secrets
import sys
import time
from collections import deque
from dataclasses import dataclass

from ..provider import LlmError
from .server import API_KEY_VARIABLE

log = logging.getLogger(__name__)

SERVER_MODULE = "trustgraph.model.text_completion.local.server"
RETRY_FAILED_START = 5.0  # seconds a failed start is answered from memory
STDERR_TAIL = 20  # lines of the server's stderr kept to explain its exit


@dataclass(frozen=True)
class ServerConfig:
    model: str  # the GGUF file
    name: str  # what the server calls the model (and what answers report)
    threads: int
    context: int  # tokens per sequence: prompt and answer
    parallel: int  # sequences generated at once


@dataclass(frozen=True)
class Running:
    url: str  # http://127.0.0.1:<port>
    api_key: str


class ModelProcess:
    def __init__(self, config: ServerConfig, api_key: str = "") -> None:
        self.config = config
        self.api_key = api_key  # empty: a fresh one per start
        self._process: asyncio.subprocess.Process | None = None
        self._running: Running | None = None
        self._lock = asyncio.Lock()
        self._failure: tuple[float, str] | None = None
        self._stderr: deque[str] = deque(maxlen=STDERR_TAIL)
        self._relay: asyncio.Task | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def alive(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def exited(self, within: float) -> bool:
        """Whether the server has exited, or does within ``within`` seconds."""
        if self._process is None:
            return False
        try:
            await asyncio.wait_for(asyncio.shield(self._process.wait()), within)
        except TimeoutError:
            return False
        return True

    async def running(self) -> Running:
        """The server, started (or restarted) when it is not running."""
        async with self._lock:
            if self._running is not None and self.alive():
                return self._running
            if self._running is not None:
                log.warning("the local model's server exited (%s); restarting it",
                            self.exit_reason())
                self._running = None
            if self._failure and time.monotonic() - self._failure[0] < RETRY_FAILED_START:
                raise LlmError(self._failure[1])
            try:
                self._running = await self._start()
            except LlmError as error:
                self._failure = (time.monotonic(), error.message)
                raise
            self._failure = None
            return self._running

    async def _start(self) -> Running:
        started = time.monotonic()
        api_key = self.api_key or secrets.token_urlsafe(24)
        self._stderr.clear()
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", SERVER_MODULE, json.dumps(self.config.__dict__),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=os.environ | {API_KEY_VARIABLE: api_key})
        stdout, stderr = self._process.stdout, self._process.stderr
        assert stdout is not None and stderr is not None  # both piped above
        self._relay = asyncio.create_task(self._relay_stderr(stderr))
        line = await stdout.readline()
        if not line:
            await self._process.wait()
            await self._relay
            raise LlmError(f"the local model {self.config.model} did not start: "
                           f"{self.exit_reason()}")
        url = json.loads(line)["url"]
        log.info("local model %s loaded in %.1f s: %s (pid %d, %d thread(s), %d "
                 "sequences of %d tokens)", self.config.name, time.monotonic() - started,
                 url, self._process.pid, self.config.threads, self.config.parallel,
                 self.config.context)
        return Running(url, api_key)

    async def _relay_stderr(self, stream: asyncio.StreamReader) -> None:
        """The server's warnings and errors go to this process's log; the last lines
        are kept to say why it exited."""
        while line := await stream.readline():
            text = line.decode(errors="replace").rstrip()
            if text:
                self._stderr.append(text)
                log.warning("local model server: %s", text)

    def exit_reason(self) -> str:
        code = self._process.returncode if self._process is not None else None
        said = " | ".join(self._stderr) or "it said nothing"
        return f"exit code {code}: {said}"

    async def stop(self) -> None:
        """Close its stdin (it exits), or terminate it after a grace period."""
        process, self._process, self._running = self._process, None, None
        if process is None or process.returncode is not None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 5.0)
        except TimeoutError:
            process.kill()
            await process.wait()
        if self._relay is not None:
            await self._relay
