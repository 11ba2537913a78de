"""Typed settings: every field is an environment variable (its name upper-cased) and
a command-line flag (its name kebab-cased) that overrides it.

``Settings`` is what every process reads: tg-start, the gateway and each processor
(the broker, the flows, the data dir, how long a request may go silent, how long
start-up waits for config, the log level, tracing). ``GatewayEndpoint`` adds where the gateway
listens and who may use it, which the gateway and tg-start (which starts it and says
where it is) both read. Each default is written once: here, or, for a time the
request protocol or the config watcher keeps, where that time is kept."""
import logging
from pathlib import Path
from typing import Annotated, TypeVar

from pydantic import BeforeValidator, Field
from pydantic_settings import BaseSettings, CliApp, NoDecode, SettingsConfigDict

from .. import tracing
from ..pubsub import DEFAULT_PULSAR_URL
from .config_client import CONFIG_WAIT
from .rpc import TIMING


def _comma_separated(value: object) -> object:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return value


# A list setting given as one comma-separated string (``TG_FLOWS=default,other``).
CommaList = Annotated[list[str], NoDecode, BeforeValidator(_comma_separated)]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        cli_kebab_case=True, cli_implicit_flags=True, extra="ignore",
        env_ignore_empty=True)

    tg_log_level: str = "INFO"
    # tg-start: named, the broker to use; unset, it starts the embedded one (pulsar-lite)
    pulsar_url: str = DEFAULT_PULSAR_URL
    tg_data_dir: str = "./tg-data"
    # The flows this process serves, pinned; empty: those config runs (its ``flow``
    # items), followed while it runs (base/flows.py). The gateway routes the same.
    tg_flows: CommaList = []
    tg_request_timeout: float = Field(TIMING.timeout, description=(
        "seconds a request may go without a record once a service has accepted it"))
    tg_config_wait: float = Field(CONFIG_WAIT, description=(
        "seconds start-up waits for the config service before going on with what it has "
        "(prompt: the shipped templates; agent: the shipped tools; the gateway answers "
        "API keys 503 until it has read them); config is read as soon as it announces "
        "itself"))
    # One trace per question and per document (docs/observability.md).
    tg_tracing: bool = Field(True, description=(
        "trace every question and loaded document (OpenTelemetry): kept in the data dir, "
        "and sent to OTEL_EXPORTER_OTLP_ENDPOINT when that is set"))
    # Sampled by default: tracing every question of 128 streams cost 7.8 % more CPU
    # per token (docs/observability.md). A question whose client sends a sampled
    # traceparent (the workbench, the tg-* commands that ask) is kept whatever this says.
    tg_trace_sample: float = Field(0.1, ge=0, le=1, description=(
        "the share of questions and documents traced when the client does not say (a "
        "sampled W3C traceparent from the client is always kept); the gateway decides "
        "per question, the services follow"))
    tg_trace_store_mb: float = Field(100.0, ge=0, description=(
        "megabytes of recent traces kept in the data dir (traces.db), oldest dropped; "
        "0 keeps none there"))
    tg_state_period: float = Field(2.0, gt=0, description=(
        "seconds between a process's state records (GET /api/v1/status); one not heard "
        "for three periods is down"))


class GatewayEndpoint(Settings):
    tg_gateway_host: str = "127.0.0.1"  # 0.0.0.0 to accept other machines
    tg_gateway_port: int = 8888
    tg_gateway_token: str = ""  # the admin key of a single-user installation
    # API keys, read from the config service (false: only the token, or open)
    tg_gateway_keys: bool = True


class ProcessorSettings(Settings):
    tg_concurrency: int = 64  # requests and stage records handled at once
    # Of those, slots bulk work (pipeline stages, and requests they make) never takes:
    # a question finds one free however deep a load's backlog (base/lanes.py).
    tg_interactive_slots: int = 16
    # Records of one pipeline stage on one flow handled at once (base/stage.py).
    tg_stage_in_flight: int = 16
    tg_backlog: int = 1024  # requests held (handled or waiting); past it, "overloaded"
    # Deliveries of a pipeline record before it goes to its stage's dead-letter topic.
    tg_max_deliveries: int = 10
    # Index of this replica among processes serving the same service (see Bus).
    tg_replica: int = 0
    # Serve this process's Prometheus metrics on this port (/metrics); 0: not served
    # (tg-start's processes share one machine: docker-compose.yaml sets it per container).
    tg_metrics_port: int = Field(0, ge=0, le=65535)


S = TypeVar("S", bound=Settings)


def start_tracing(settings: Settings, process: str) -> None:
    """Trace this process as ``settings`` say (``process``: its name in tg-start's
    output and in each span's ``tg.process``)."""
    tracing.configure(process, settings.tg_tracing, settings.tg_trace_sample,
                      Path(settings.tg_data_dir) / tracing.STORE_FILE,
                      int(settings.tg_trace_store_mb * 1_000_000))


def load_settings(model: type[S], argv: list[str] | None, prog: str) -> S:
    settings = CliApp.run(model, cli_args=argv or [])
    logging.basicConfig(level=settings.tg_log_level.upper(),
                        format=f"%(asctime)s {prog} %(levelname)s %(name)s: %(message)s")
    logging.getLogger("pulsar").setLevel(max(logging.WARNING, logging.getLogger().level))
    return settings
