"""Config service records (PROTOCOL §4).

Configuration is typed and versioned: an item is ``(type, key) -> JSON value``, e.g.
``("prompt", "kg-prompt") -> {...template...}``. Every change bumps one counter, the
``version``, and is announced on ``CONFIG_NOTIFY_TOPIC`` with the types it touched.

Operations of ``ConfigRequest``, and what they read and answer:

=========  ================  ==============================================
operation  request fields    response fields (always ``version``)
=========  ================  ==============================================
get        keys              values (one per key; unknown key: not-found)
list       type              directory (the keys of that type, sorted)
getvalues  type              values (every item of that type)
put        values            (the new version)
delete     keys              (the new version; unknown key: not-found)
config     (none)            config ({type: {key: value}}, everything)
=========  ================  ==============================================
"""
from typing import Literal

from pydantic import JsonValue

from .record import Record, Response
from .topics import TENANT_NAMESPACE

# Configuration is global, not per flow: its service answers on this flow only.
CONFIG_FLOW = "default"

# A broadcast: every listener subscribes under its own subscription name.
CONFIG_NOTIFY_TOPIC = f"non-persistent://{TENANT_NAMESPACE}/control/config-notify"

ConfigOperation = Literal["get", "list", "getvalues", "put", "delete", "config"]


class ConfigKey(Record):
    type: str
    key: str


class ConfigValue(Record):
    type: str
    key: str
    value: JsonValue = None


class ConfigRequest(Record):
    operation: ConfigOperation
    keys: list[ConfigKey] = []
    type: str = ""
    values: list[ConfigValue] = []


class ConfigResponse(Response):
    version: int | None = None
    values: list[ConfigValue] | None = None
    directory: list[str] | None = None
    config: dict[str, dict[str, JsonValue]] | None = None


class ConfigNotify(Record):
    """Sent after every change, and once when the config service starts."""

    version: int
    types: list[str] = []


# Which LLM answers: text-completion records its choice here when it starts
# (``{"provider", "model", "demo", "notice"}`` under the key ``text-completion``), so
# the gateway can tell the workbench without sharing text-completion's environment.
LLM_CONFIG_TYPE = "llm"
LLM_CONFIG_KEY = "text-completion"
