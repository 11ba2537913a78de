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

``value_format`` says how values travel. ``json`` (the default): as JSON values.
``text``: as TrustGraph's client and CLI write and read them, each value a string of
JSON text: a ``put`` value that is a string holding JSON is stored as that JSON (any
other string as the string itself); every value read is answered as its JSON text;
and ``get`` answers the items that exist, leaving out those that do not (no
not-found). The gateway's ``POST /api/v1/config`` (TrustGraph's surface) asks with
``text`` unless told otherwise (docs/config.md).
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
ValueFormat = Literal["json", "text"]


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
    value_format: ValueFormat = "json"


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
