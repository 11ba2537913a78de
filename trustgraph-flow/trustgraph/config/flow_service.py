"""The ``flow`` service (PROTOCOL §3): blueprints and flows, kept as config items in
the config processor's store (``trustgraph.schema.flows``), each change announced
like any config change, so every processor and gateway following flows hears of it.

``start-flow`` checks everything first (the flow id, the blueprint, each parameter
against its declared type: ``parameters.resolved``) and then writes the flow as one
item: a flow either starts whole or not at all. ``seed`` writes the default
blueprint, its parameter types and flow ``default`` into a fresh store.
"""
import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping

from pydantic import JsonValue, ValidationError

from trustgraph.base import BadRequest, Context, HandledError, Handler
from trustgraph.schema import ConfigKey, ConfigValue, request_topic, response_topic
from trustgraph.schema.flows import (
    BLUEPRINT_CONFIG_TYPE,
    DEFAULT_BLUEPRINT,
    DEFAULT_FLOW,
    FLOW_CONFIG_TYPE,
    INTERFACE_CONFIG_TYPE,
    PARAMETER_TYPE_CONFIG_TYPE,
    Blueprint,
    FlowDefinition,
    FlowOperation,
    FlowRequest,
    FlowResponse,
    Interface,
    ParameterType,
)
from trustgraph.schema.operations import per_operation

from .default_flow import PARAMETER_TYPES, default_blueprint, interface_descriptions
from .parameters import resolved
from .store import ConfigStore

log = logging.getLogger(__name__)

# A flow id is part of topic names (``…/chunks:<flow>``).
FLOW_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

Changed = tuple[FlowResponse, list[str]]  # the answer, and the config types changed


def _names(store: ConfigStore, type: str) -> list[str]:
    return store.keys(type)[0]


def _item(store: ConfigStore, type: str, key: str, what: str) -> object:
    """The item, or ``not-found`` naming those there are."""
    values = dict((v.key, v.value) for v in store.values(type)[0])
    if key not in values:
        there = ", ".join(sorted(values)) or "none"
        raise HandledError("not-found", f"no {what} {key!r} ({what}s: {there})")
    return values[key]


def _blueprint(store: ConfigStore, name: str) -> Blueprint:
    if not name:
        raise BadRequest("blueprint-name is required")
    return Blueprint.model_validate(_item(store, BLUEPRINT_CONFIG_TYPE, name, "blueprint"))


def _parameter_types(store: ConfigStore) -> dict[str, ParameterType]:
    types = {}
    for value in store.values(PARAMETER_TYPE_CONFIG_TYPE)[0]:
        try:
            types[value.key] = ParameterType.model_validate(value.value)
        except ValidationError as error:
            log.warning("parameter-type/%s is malformed: %s", value.key, error)
    return types


def _list_blueprints(store: ConfigStore, request: FlowRequest) -> Changed:
    return FlowResponse(blueprint_names=_names(store, BLUEPRINT_CONFIG_TYPE)), []


def _get_blueprint(store: ConfigStore, request: FlowRequest) -> Changed:
    if not request.blueprint_name:
        raise BadRequest("blueprint-name is required")
    item = _item(store, BLUEPRINT_CONFIG_TYPE, request.blueprint_name, "blueprint")
    return FlowResponse(blueprint_definition=json.dumps(item)), []


def _put_blueprint(store: ConfigStore, request: FlowRequest) -> Changed:
    if not request.blueprint_name:
        raise BadRequest("blueprint-name is required")
    blueprint = parsed_blueprint(request.blueprint_definition)
    types = _parameter_types(store)
    for name, parameter in blueprint.parameters.items():
        if parameter.type not in types:
            raise BadRequest(f"blueprint-definition: parameter {name}: type "
                             f"{parameter.type!r} is not a parameter-type (known: "
                             f"{', '.join(sorted(types))})")
    store.put([ConfigValue(type=BLUEPRINT_CONFIG_TYPE, key=request.blueprint_name,
                           value=blueprint.as_item())])
    return FlowResponse(), [BLUEPRINT_CONFIG_TYPE]


def parsed_blueprint(text: str) -> Blueprint:
    """A ``blueprint-definition`` (JSON text), or the 400 saying what is wrong."""
    try:
        blueprint = Blueprint.model_validate_json(text or "null")
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise BadRequest(f"blueprint-definition{'.' + where if where else ''}: "
                         f"{problem['msg']}") from None
    if not blueprint.processors:
        raise BadRequest("blueprint-definition.processors: name the processors that run "
                         "its flows (tg-get-flow-blueprint -n default shows the default's)")
    return blueprint


def _delete_blueprint(store: ConfigStore, request: FlowRequest) -> Changed:
    _blueprint(store, request.blueprint_name)  # not-found first
    users = sorted(v.key for v in store.values(FLOW_CONFIG_TYPE)[0]
                   if isinstance(v.value, dict)
                   and v.value.get("blueprint-name") == request.blueprint_name)
    if users:
        raise HandledError("conflict", f"blueprint {request.blueprint_name!r} is used by "
                                       f"running flows: {', '.join(users)}; stop them first")
    store.delete([ConfigKey(type=BLUEPRINT_CONFIG_TYPE, key=request.blueprint_name)])
    return FlowResponse(), [BLUEPRINT_CONFIG_TYPE]


def _list_flows(store: ConfigStore, request: FlowRequest) -> Changed:
    return FlowResponse(flow_ids=_names(store, FLOW_CONFIG_TYPE)), []


def _get_flow(store: ConfigStore, request: FlowRequest) -> Changed:
    if not request.flow_id:
        raise BadRequest("flow-id is required")
    item = _item(store, FLOW_CONFIG_TYPE, request.flow_id, "flow")
    return FlowResponse(flow=json.dumps(item)), []


def _start_flow(store: ConfigStore, request: FlowRequest) -> Changed:
    flow_id = request.flow_id
    if not FLOW_ID.match(flow_id):
        raise BadRequest(f"flow-id: {flow_id!r} is not a flow id (letters, digits and "
                         f"._- up to 64, starting with a letter or digit)")
    blueprint = _blueprint(store, request.blueprint_name)
    definition = flow_definition(flow_id, request.blueprint_name, blueprint,
                                 request.description, request.parameters,
                                 _parameter_types(store))
    store.insert(ConfigValue(type=FLOW_CONFIG_TYPE, key=flow_id, value=definition.as_item()),
                 taken=f"flow {flow_id!r} is running already (tg-stop-flow -i {flow_id} "
                       f"stops it)")
    log.info("flow %s started from blueprint %s with %s", flow_id, request.blueprint_name,
             definition.parameters or "no parameters")
    return FlowResponse(), [FLOW_CONFIG_TYPE]


def flow_definition(flow_id: str, blueprint_name: str, blueprint: Blueprint,
                    description: str, parameters: Mapping[str, JsonValue],
                    types: Mapping[str, ParameterType]) -> FlowDefinition:
    """The flow as config keeps it; its parameters checked and typed."""
    values = resolved(blueprint_name, blueprint, types, parameters)
    interfaces = {name: Interface(request=request_topic(name, flow_id),
                                  response=response_topic(name, flow_id, "*"))
                  for name in blueprint.interfaces}
    return FlowDefinition(blueprint_name=blueprint_name, description=description,
                          processors=blueprint.processors, parameters=values,
                          interfaces=interfaces)


def _stop_flow(store: ConfigStore, request: FlowRequest) -> Changed:
    if not request.flow_id:
        raise BadRequest("flow-id is required")
    _item(store, FLOW_CONFIG_TYPE, request.flow_id, "flow")  # not-found, naming them
    store.delete([ConfigKey(type=FLOW_CONFIG_TYPE, key=request.flow_id)])
    log.info("flow %s stopped", request.flow_id)
    return FlowResponse(), [FLOW_CONFIG_TYPE]


FLOW_OPERATIONS: Mapping[FlowOperation, Callable[[ConfigStore, FlowRequest], Changed]] = \
    per_operation(FlowRequest, {
        "list-blueprints": _list_blueprints, "get-blueprint": _get_blueprint,
        "put-blueprint": _put_blueprint, "delete-blueprint": _delete_blueprint,
        "list-flows": _list_flows, "get-flow": _get_flow, "start-flow": _start_flow,
        "stop-flow": _stop_flow,
    }, "the flow service's operations")


def flow_handler(store: ConfigStore, notify: Callable[[int, list[str]], Awaitable[None]]
                 ) -> Handler[FlowRequest, FlowResponse]:
    """``notify(version, types)`` is awaited after every change."""

    async def handle(request: FlowRequest, ctx: Context) -> FlowResponse:
        response, changed = await asyncio.to_thread(
            FLOW_OPERATIONS[request.operation], store, request)
        response.end_of_stream = True
        if changed:
            await notify(await asyncio.to_thread(store.version), changed)
        return response

    return handle


def seed(store: ConfigStore) -> list[str]:
    """What a store needs to run flows, written where it is missing: the parameter
    types and interface descriptions the default blueprint uses; and, when the store
    holds no blueprint and no flow (a fresh data dir, or one from before flows were
    config), the default blueprint and flow ``default`` started from it. The config
    types changed."""
    values = [ConfigValue(type=PARAMETER_TYPE_CONFIG_TYPE, key=name, value=kind.as_item())
              for name, kind in PARAMETER_TYPES.items()]
    values += [ConfigValue(type=INTERFACE_CONFIG_TYPE, key=name, value=text.as_item())
               for name, text in interface_descriptions().items()]
    fresh = not _names(store, BLUEPRINT_CONFIG_TYPE) and not _names(store, FLOW_CONFIG_TYPE)
    if fresh:
        blueprint = default_blueprint()
        flow = flow_definition(DEFAULT_FLOW, DEFAULT_BLUEPRINT, blueprint,
                               "the default flow", {}, PARAMETER_TYPES)
        values += [ConfigValue(type=BLUEPRINT_CONFIG_TYPE, key=DEFAULT_BLUEPRINT,
                               value=blueprint.as_item()),
                   ConfigValue(type=FLOW_CONFIG_TYPE, key=DEFAULT_FLOW,
                               value=flow.as_item())]
    if store.add_missing(values) is None:
        return []
    if fresh:
        log.info("flow %s started from blueprint %s (a fresh config)", DEFAULT_FLOW,
                 DEFAULT_BLUEPRINT)
    return sorted({value.type for value in values})
