"""Typed settings: every field is an environment variable (its name upper-cased) and
a command-line flag (its name kebab-cased) that overrides it."""
import logging
from typing import Annotated, TypeVar

from pydantic import BeforeValidator
from pydantic_settings import BaseSettings, CliApp, NoDecode, SettingsConfigDict

from ..pubsub import DEFAULT_PULSAR_URL

S = TypeVar("S", bound=BaseSettings)


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


class ProcessorSettings(Settings):
    pulsar_url: str = DEFAULT_PULSAR_URL
    tg_data_dir: str = "./tg-data"
    tg_flows: CommaList = ["default"]
    tg_concurrency: int = 64  # requests handled at once
    tg_backlog: int = 1024  # requests held (handled or waiting); past it, "overloaded"
    # Deliveries of a pipeline record before it goes to its stage's dead-letter topic.
    tg_max_deliveries: int = 10
    tg_request_timeout: float = 120.0
    # Index of this replica among processes serving the same service (see Bus).
    tg_replica: int = 0


def load_settings(model: type[S], argv: list[str] | None, prog: str) -> S:
    settings = CliApp.run(model, cli_args=argv or [])
    level = getattr(settings, "tg_log_level", "INFO")
    logging.basicConfig(level=level.upper(),
                        format=f"%(asctime)s {prog} %(levelname)s %(name)s: %(message)s")
    logging.getLogger("pulsar").setLevel(max(logging.WARNING, logging.getLogger().level))
    return settings
