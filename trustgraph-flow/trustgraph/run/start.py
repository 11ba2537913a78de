"""``tg-start``: the whole platform on one machine in one command.

Starts the embedded broker (unless ``PULSAR_URL`` names one), then every processor in
``TG_PROCESSORS`` and the gateway as child processes (``tg-run <name>``; an entry
``a+b`` is a process group, one child running both), prints where
each part listens and a ``ready`` line, keeps them running, and on Ctrl-C / SIGTERM
stops gateway, processors and broker in that order and exits 0.
"""
import asyncio
import importlib.util
import os
import signal
import socket
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field

from trustgraph.base import load_settings
from trustgraph.base.settings import CommaList, GatewayEndpoint
from trustgraph.pubsub.embedded import BrokerUnavailable, EmbeddedBroker
from trustgraph.schema.lazy_rag import LazyRagSwitch
from trustgraph.tracing import STORE_FILE
from trustgraph.tracing.setup import OTLP_VARIABLES

from .leftovers import holding
from .registry import (
    DEFAULT_STACK,
    GROUP_SEPARATOR,
    PROVIDER_PREFIX,
    RUNNABLES,
    members,
    stop_waves,
    switched_off,
)
from .replicas import ReplicasError, replica_counts, replica_name
from .rundir import AlreadyRunning, RunDir
from .supervisor import BrokerKeeper, Child

GATEWAY = "gateway"
POLL = 0.05  # seconds between readiness checks while starting
SLOW_START = 15.0  # seconds before naming the parts still starting
WIDTH = 15  # of the first column of what tg-start prints


class StartSettings(GatewayEndpoint, LazyRagSwitch):
    """What every process reads (passed on to each child as tg-start has it), where
    the gateway listens, the switches that leave processors out, and tg-start's own."""

    tg_broker_port: int = 6650
    tg_processors: CommaList = DEFAULT_STACK
    # NAME=N: N processes of that part sharing its work (replicas.py); also --replicas
    tg_replicas: CommaList = Field([], validation_alias=AliasChoices("tg_replicas", "replicas"))

    @property
    def external_broker(self) -> str | None:
        """The broker PULSAR_URL names; None: none is named, start the embedded one."""
        return self.pulsar_url if "pulsar_url" in self.model_fields_set and self.pulsar_url \
            else None


class StartError(Exception):
    pass


def say(text: str, file=None) -> None:
    print(f"tg-start: {text}", file=file or sys.stdout, flush=True)


def module_of(name: str) -> str:
    if name.startswith(PROVIDER_PREFIX):
        provider = name.removeprefix(PROVIDER_PREFIX).replace("-", "_")
        return f"trustgraph.model.text_completion.{provider}.provider"
    if name not in RUNNABLES:
        raise StartError(f"unknown part {name!r} in TG_PROCESSORS; known: "
                         f"{', '.join(sorted(RUNNABLES))}, {PROVIDER_PREFIX}<provider>")
    return RUNNABLES[name].split(":")[0]


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def plan(entries: list[str], settings: StartSettings) -> list[str]:
    """The parts to run, processors first and the gateway last. An entry is a name or
    a process group (``prompt+text-completion``, one child process); a processor whose
    module is not installed, or that ``settings`` switch off, is left out with a line
    saying so, the rest of its group still run."""
    parts, seen = list[str](), set[str]()
    for entry in dict.fromkeys(entries):
        try:
            names = members(entry)
        except ValueError as error:
            raise StartError(f"TG_PROCESSORS: {error}") from None
        if twice := seen.intersection(names):
            raise StartError(f"TG_PROCESSORS names {twice.pop()} twice")
        seen.update(names)
        kept = [name for name in names if _installed_or_said(name, settings)]
        if kept:
            parts.append(GROUP_SEPARATOR.join(kept))
    return sorted(parts, key=lambda name: name == GATEWAY)


def _installed_or_said(name: str, settings: StartSettings) -> bool:
    if variable := switched_off(name, settings):
        say(f"skipping {name}: {variable} is false")
        return False
    module = module_of(name)
    if installed(module):
        return True
    say(f"skipping {name}: {module} is not installed")
    return False


def _env_value(value: object) -> str:
    """A setting's value as its environment variable says it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def local_host(host: str) -> str:
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host


def accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((local_host(host), port), timeout=0.2):
            return True
    except OSError:
        return False


def check_free(host: str, port: int, setting: str) -> None:
    """Refuse to start on a port something else listens on, naming what does (this
    data dir's own leftovers were stopped already: ``RunDir.claim``)."""
    if not accepts(host, port):
        return
    holder = holding(port)
    who = f" by {holder}" if holder else ""
    raise StartError(f"port {port} is already in use{who}; stop it or choose another "
                     f"port with {setting}")


async def accepts_async(host: str, port: int) -> bool:
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(local_host(host), port), 1.0)
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True


class Platform:
    """The broker (embedded or not), the processors and the gateway of one tg-start."""

    def __init__(self, settings: StartSettings, parts: list[str], run_dir: RunDir,
                 shutdown: asyncio.Event, replicas: dict[str, int] | None = None) -> None:
        """``replicas``: processes of each part that runs more than one."""
        self.settings = settings
        self.parts = parts
        self.run_dir = run_dir
        self.data_dir = run_dir.path.parent
        self.shutdown = shutdown
        self.broker: BrokerKeeper | None = None
        self.pulsar_url = settings.external_broker or ""
        if not self.pulsar_url:
            self.broker = BrokerKeeper(
                EmbeddedBroker(self.data_dir, settings.tg_broker_port), run_dir, shutdown,
                on_spawn=self._broker_started)
            self.pulsar_url = self.broker.broker.url
        host = local_host(settings.tg_gateway_host)
        self.http_url = f"http://{host}:{settings.tg_gateway_port}/"
        self.ws_url = f"ws://{host}:{settings.tg_gateway_port}/api/v1/socket"
        # The gateway checks API keys unless told not to, or no config service (which
        # keeps them) may be on the bus.
        self.keys = settings.tg_gateway_keys if "tg_gateway_keys" in settings.model_fields_set \
            else self.keys_served(parts)
        env = self._child_env()
        self.children = [
            Child(replica_name(part, i), [sys.executable, "-m", "trustgraph.run.single", part],
                  env | {"TG_READY_FILE": str(run_dir.ready_file(replica_name(part, i))),
                         "TG_REPLICA": str(i)},
                  run_dir, shutdown, on_spawn=self._child_started)
            for part in parts for i in range((replicas or {}).get(part, 1))]

    def _child_env(self) -> dict[str, str]:
        """This environment, with what every child reads as tg-start read it (its flags
        included), the broker's URL and the absolute data dir."""
        s = self.settings
        shared = {name.upper(): _env_value(getattr(s, name))
                  for name in (*GatewayEndpoint.model_fields, *LazyRagSwitch.model_fields)}
        return {**os.environ, **shared, "PULSAR_URL": self.pulsar_url,
                "TG_DATA_DIR": str(self.data_dir), "TG_GATEWAY_KEYS": _env_value(self.keys),
                "TG_SUPERVISOR_PID": str(os.getpid())}

    def keys_served(self, parts: list[str]) -> bool:
        """Whether a config service (which keeps the API keys) may be on the bus: one
        of ours, or, on a broker not ours, perhaps someone else's."""
        ours = any("config" in members(part) for part in parts)
        return ours or self.broker is None

    async def start(self) -> None:
        say(f"{'data dir':<{WIDTH}} {self.data_dir}")
        if where := _traces(self.settings, self.data_dir):
            say(f"{'traces':<{WIDTH}} {where}")
        if self.broker:
            await self.broker.start()
        else:
            await self._check_external_broker()
        if self.shutdown.is_set():
            return
        _say_llm(self.parts)
        for child in self.children:
            child.start()

    async def stop(self) -> None:
        """Callers before what they call (``registry.stop_waves``: the gateway first,
        so no new request comes; config last), each wave together; then the broker."""
        self.shutdown.set()  # restart nothing from now on
        results: list[BaseException | None] = []
        for wave in stop_waves(self.parts):
            results += await asyncio.gather(*(c.stop() for c in self.children
                                              if c.argv[-1] in wave), return_exceptions=True)
        if self.broker:
            await self.broker.stop()
        for error in results:
            if error is not None:
                raise error

    async def settled(self) -> list[str]:
        """Wait until no part is still starting: each processor serves (its ready
        file exists) and the gateway accepts connections, or the part has exited.
        Returns the names of the parts that exited while starting."""
        started = time.monotonic()
        warned = False
        while True:
            waiting = [c.name for c in self.children if not await self._settled(c)]
            if not waiting:
                return [c.name for c in self.children if c.exits]
            if not warned and time.monotonic() - started > SLOW_START:
                warned = True
                say(f"still starting after {SLOW_START:g} s: {', '.join(waiting)}")
            await asyncio.sleep(POLL)

    async def _settled(self, child: Child) -> bool:
        if child.exits or child.process is None:
            return child.exits > 0
        if child.name == GATEWAY:
            return await accepts_async(self.settings.tg_gateway_host,
                                       self.settings.tg_gateway_port)
        return self.run_dir.ready_file(child.name).exists()

    def _broker_started(self, broker: EmbeddedBroker, again: bool) -> None:
        assert broker.process is not None  # just spawned
        if again:
            say(f"broker restarted, pid {broker.process.pid}")
        else:
            say(f"{'broker':<{WIDTH}} {broker.url}  (embedded pulsar-lite, pid "
                f"{broker.process.pid}, log {broker.dir / 'broker.log'})")

    def _child_started(self, child: Child, again: bool) -> None:
        if again:
            say(f"{child.name} restarted, pid {child.pid}")
        elif child.name == GATEWAY:
            s = self.settings
            keys = self.keys
            access = ("token-protected (TG_GATEWAY_TOKEN)" if s.tg_gateway_token
                      else "API keys (open to this machine until one is created)" if keys
                      else "OPEN: no TG_GATEWAY_TOKEN set (to this machine only)")
            if keys and s.tg_gateway_token:
                access += " and API keys"
            where = "" if local_host(s.tg_gateway_host) == s.tg_gateway_host \
                else f" on all interfaces ({s.tg_gateway_host})"
            say(f"{GATEWAY:<{WIDTH}} {self.http_url}  {self.ws_url}{where}  {access}  "
                f"(pid {child.pid})")
        else:
            say(f"{child.name:<{WIDTH}} pid {child.pid}")

    async def _check_external_broker(self) -> None:
        url = urlsplit(self.pulsar_url)
        say(f"{'broker':<{WIDTH}} {self.pulsar_url}  (PULSAR_URL)")
        if url.hostname and not await accepts_async(url.hostname, url.port or 6650):
            say(f"broker {self.pulsar_url} does not answer yet; the parts will keep "
                f"retrying")


def _traces(settings: StartSettings, data_dir: Path) -> str:
    """Where the platform's traces go, as tg-start says it ("" when tracing is off)."""
    if not settings.tg_tracing:
        return ""
    kept = [f"{data_dir / STORE_FILE} (tg-list-traces, tg-show-trace ID)"] \
        if settings.tg_trace_store_mb > 0 else []
    collector = next((os.environ[v] for v in OTLP_VARIABLES if os.environ.get(v)), "")
    if collector:
        kept.append(f"OTLP {collector}")
    if not kept:  # nowhere to send them: not traced
        return ""
    sampled = (f"; those clients ask for, and {settings.tg_trace_sample:.0%} of the rest"
               if settings.tg_trace_sample < 1 else "")
    return " and ".join(kept) + sampled


def _say_llm(parts: list[str]) -> None:
    """Which LLM answers, when text-completion is among ``parts``; plainly a demo when
    it is the bundled model."""
    names = [name for part in parts for name in members(part)]
    fixed = [n.removeprefix(PROVIDER_PREFIX) for n in names if n.startswith(PROVIDER_PREFIX)]
    if not fixed and "text-completion" not in names:
        return
    from trustgraph.model.text_completion.choice import current
    first, *more = current(fixed[0] if fixed else None).lines()
    say(f"{'llm':<{WIDTH}} {first}")
    for line in more:
        say(f"{'':<{WIDTH}} {line}")


async def serve(settings: StartSettings, parts: list[str], run_dir: RunDir,
                replicas: dict[str, int] | None = None) -> None:
    started = time.monotonic()
    shutdown = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, shutdown.set)
    platform = Platform(settings, parts, run_dir, shutdown, replicas)
    try:
        await platform.start()
        settled = asyncio.ensure_future(platform.settled())
        stopped = asyncio.ensure_future(shutdown.wait())
        await asyncio.wait({settled, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if settled.done():
            _announce_ready(platform, settled.result(), time.monotonic() - started)
        settled.cancel()
        await stopped
        say("stopping")
    finally:
        await platform.stop()
    say("stopped")


def _announce_ready(platform: Platform, failed: list[str], took: float) -> None:
    where = (f"gateway {platform.http_url}" if any(c.name == GATEWAY for c in platform.children)
             else f"broker {platform.pulsar_url} (no gateway)")
    problems = f"; FAILED to start: {', '.join(failed)} (restarting; see the log above)" \
        if failed else ""
    say(f"ready in {took:.1f} s: {where}{problems}  (Ctrl-C stops everything)")


def main(argv: list[str] | None = None) -> int:
    settings = load_settings(StartSettings, sys.argv[1:] if argv is None else argv,
                             "tg-start")
    run_dir = RunDir(Path(settings.tg_data_dir).absolute() / "run")
    try:
        parts = plan(settings.tg_processors, settings)
        replicas = replica_counts(settings.tg_replicas, parts, os.environ)
        run_dir.claim()
    except (StartError, ReplicasError, AlreadyRunning) as error:
        say(f"error: {error}", sys.stderr)
        return 1
    try:
        if GATEWAY in parts:
            check_free(settings.tg_gateway_host, settings.tg_gateway_port, "TG_GATEWAY_PORT")
        if not settings.external_broker:
            check_free("127.0.0.1", settings.tg_broker_port, "TG_BROKER_PORT")
        asyncio.run(serve(settings, parts, run_dir, replicas))
    except StartError as error:
        say(f"error: {error}", sys.stderr)
        return 1
    except BrokerUnavailable as error:
        say(f"cannot start the embedded broker: {error}", sys.stderr)
        return 1
    finally:
        run_dir.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
