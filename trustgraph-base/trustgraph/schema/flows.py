"""Flows as data (DESIGN §3): the config items that define them, and the records of the
``flow`` service that starts and stops them (PROTOCOL §3, TrustGraph's operations and
field names).

Four config types, each a JSON object per key:

* ``flow-blueprint``: a kind of flow (``Blueprint``): which processors run it, its
  parameters (name → ``BlueprintParameter``: a ``parameter-type``'s name, a
  description, an order) and the services it offers clients (``interfaces``);
* ``parameter-type``: what a parameter's value may be (``ParameterType``: type,
  default, enum, minimum, maximum, ...), as TrustGraph's ``tg-show-parameter-types``
  reads it;
* ``flow``: a running flow (``FlowDefinition``), by id: the blueprint it was started
  from, with that blueprint's processors copied in (a flow keeps running as it was
  started when its blueprint changes), its checked and typed parameter values and
  its interfaces' topics. Processors and gateways watch this type: a flow is served
  while its item exists;
* ``interface-description``: what each interface is, for ``tg-show-flows``.

Operations of ``FlowRequest`` (hyphenated on the wire, as TrustGraph's client sends
them; answers are hyphenated too):

================  ============================================  =======================
operation         request fields                                answer fields
================  ============================================  =======================
list-blueprints   (none)                                        blueprint-names
get-blueprint     blueprint-name                                blueprint-definition
put-blueprint     blueprint-name, blueprint-definition          (nothing)
delete-blueprint  blueprint-name                                (nothing)
list-flows        (none)                                        flow-ids
get-flow          flow-id                                       flow
start-flow        blueprint-name, flow-id, description,         (nothing)
                  parameters
stop-flow         flow-id                                       (nothing)
================  ============================================  =======================

``blueprint-definition`` and ``flow`` are JSON text (TrustGraph's client decodes
them). Parameter values may come as strings (TrustGraph's CLI sends every value as
one): ``start-flow`` converts each to its declared type.
"""
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from .record import Record, Response

# The flow service is outside flows, like config: asked on this flow only.
FLOW_SERVICE_FLOW = "default"
# The flow a fresh data dir starts with, from the blueprint of the same name; and the
# flow a processor serves when no config service answers (base/flows.py).
DEFAULT_FLOW = "default"
DEFAULT_BLUEPRINT = "default"

FLOW_CONFIG_TYPE = "flow"
BLUEPRINT_CONFIG_TYPE = "flow-blueprint"
PARAMETER_TYPE_CONFIG_TYPE = "parameter-type"
INTERFACE_CONFIG_TYPE = "interface-description"

FlowOperation = Literal["list-blueprints", "get-blueprint", "put-blueprint",
                        "delete-blueprint", "list-flows", "get-flow", "start-flow",
                        "stop-flow"]

ValueType = Literal["string", "integer", "number", "boolean"]


class ConfigItem(BaseModel):
    """A config item's JSON object: hyphenated keys, unknown ones kept as they are
    (a blueprint written by hand round-trips through ``get-blueprint``)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True,
                              alias_generator=lambda name: name.replace("_", "-"))

    def as_item(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)


class EnumValue(ConfigItem):
    id: str
    description: str = ""


class ParameterType(ConfigItem):
    """What a value may be. ``default`` None: the processor's own setting applies
    (and the description says which)."""

    type: ValueType = "string"
    description: str = ""
    default: JsonValue = None
    enum: list[str | EnumValue] | None = None
    minimum: int | float | None = None
    maximum: int | float | None = None
    min_length: int | None = Field(None, alias="minLength")
    max_length: int | None = Field(None, alias="maxLength")
    pattern: str | None = None
    required: bool = False

    def choices(self) -> list[str]:
        """The enum's values (its ids), or none when any value goes."""
        return [e.id if isinstance(e, EnumValue) else e for e in self.enum or []]


class BlueprintParameter(ConfigItem):
    """A parameter a blueprint declares: its type (a ``parameter-type`` key), what it
    means, where it is listed; ``default`` overrides the type's."""

    type: str
    description: str = ""
    order: int = 999
    default: JsonValue = None


class Blueprint(ConfigItem):
    description: str = ""
    tags: list[str] = []
    # Processor names (as tg-run names them; ``text-completion`` also names each
    # ``text-completion-<provider>``).
    processors: list[str] = []
    parameters: dict[str, BlueprintParameter] = {}
    # The services a client may ask on such a flow (their topics are named on each
    # flow's ``interfaces``).
    interfaces: list[str] = []


class Interface(ConfigItem):
    """Where an interface is on the bus: a service's request and response topics."""

    request: str
    response: str


class InterfaceDescription(ConfigItem):
    description: str = ""
    kind: Literal["request-response", "send"] = "request-response"
    visible: bool = True


class FlowDefinition(ConfigItem):
    """A running flow, as ``start-flow`` made it."""

    blueprint_name: str
    description: str = ""
    processors: list[str] = []
    parameters: dict[str, JsonValue] = {}
    interfaces: dict[str, Interface] = {}


class FlowRequest(Record):
    operation: FlowOperation
    blueprint_name: str = ""
    blueprint_definition: str = ""  # JSON text of a ``Blueprint``
    flow_id: str = ""
    description: str = ""
    parameters: dict[str, JsonValue] = {}
    workspace: str = ""  # TrustGraph's clients send it; the caller's key decides


class FlowResponse(Response):
    """Written hyphenated on the bus and the wire alike, as TrustGraph's client reads
    it (``blueprint-names``, ``flow-ids``, ``blueprint-definition``, ``flow``)."""

    model_config = ConfigDict(serialize_by_alias=True)

    blueprint_names: list[str] | None = Field(None, serialization_alias="blueprint-names")
    blueprint_definition: str | None = Field(None,
                                             serialization_alias="blueprint-definition")
    flow_ids: list[str] | None = Field(None, serialization_alias="flow-ids")
    flow: str | None = None  # JSON text of a ``FlowDefinition``
