"""The config processor: typed, versioned configuration (prompts, flows, tools) kept
in ``TG_DATA_DIR/config.db``, served on the bus, each change announced on
``CONFIG_NOTIFY_TOPIC`` so processors apply edits without a restart.

It also serves ``keys``: the users and API keys the gateway checks callers against,
in the same file (``keys.py``); a change to them is announced as ``KEYS_CHANGED``;
and ``flow``: blueprints and flows, which are config items (``flow_service.py``).
All three are outside flows: each answers on its one flow whichever flows run.

The operations are declared by the request records (``trustgraph.schema.config``,
``trustgraph.schema.keys``); each is one function here, found in the service's table
(``CONFIG_OPERATIONS``, ``KEYS_OPERATIONS``).
"""
import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from trustgraph.base import (
    BadRequest,
    Context,
    Handler,
    ProcessorSettings,
    ProcessorSpec,
    Runtime,
    Service,
)
from trustgraph.schema import (
    CONFIG_FLOW,
    CONFIG_NOTIFY_TOPIC,
    KEYS_CHANGED,
    KEYS_FLOW,
    ConfigNotify,
    ConfigRequest,
    ConfigResponse,
    KeysRequest,
    KeysResponse,
)
from trustgraph.schema.config import ConfigOperation
from trustgraph.schema.flows import FLOW_SERVICE_FLOW, FlowRequest, FlowResponse
from trustgraph.schema.keys import KeysOperation
from trustgraph.schema.operations import per_operation

from . import text_values
from .flow_service import flow_handler, seed
from .keys import KeyStore
from .store import ConfigStore

log = logging.getLogger(__name__)

NAME = "config"


class ConfigSettings(ProcessorSettings):
    """Every processor's settings; ``TG_FLOWS`` changes nothing here: its services
    are outside flows (``global_flow``)."""


def _need(condition: object, message: str) -> None:
    if not condition:
        raise BadRequest(message)


# --- config's operations: each runs on a worker thread (SQLite) and gives the answer
# and the types it changed.

Changed = tuple[ConfigResponse, list[str]]


def _get(store: ConfigStore, request: ConfigRequest) -> Changed:
    _need(request.keys, "get needs keys: [{type, key}, ...]")
    # TrustGraph's clients ask for items that may not exist (and are told which do).
    values, version = store.get(request.keys, missing_ok=request.value_format == "text")
    return ConfigResponse(values=values, version=version), []


def _list(store: ConfigStore, request: ConfigRequest) -> Changed:
    _need(request.type, "list needs a type")
    keys, version = store.keys(request.type)
    return ConfigResponse(directory=keys, version=version), []


def _getvalues(store: ConfigStore, request: ConfigRequest) -> Changed:
    _need(request.type, "getvalues needs a type")
    values, version = store.values(request.type)
    return ConfigResponse(values=values, version=version), []


def _config(store: ConfigStore, request: ConfigRequest) -> Changed:
    config, version = store.everything()
    return ConfigResponse(config=config, version=version), []


def _put(store: ConfigStore, request: ConfigRequest) -> Changed:
    _need(request.values, "put needs values: [{type, key, value}, ...]")
    _need(all(v.type and v.key for v in request.values),
          "every value needs a non-empty type and key")
    version = store.put(request.values)
    return ConfigResponse(version=version), [v.type for v in request.values]


def _delete(store: ConfigStore, request: ConfigRequest) -> Changed:
    _need(request.keys, "delete needs keys: [{type, key}, ...]")
    version = store.delete(request.keys)
    return ConfigResponse(version=version), [k.type for k in request.keys]


CONFIG_OPERATIONS: Mapping[ConfigOperation, Callable[[ConfigStore, ConfigRequest], Changed]] \
    = per_operation(ConfigRequest, {
        "get": _get, "list": _list, "getvalues": _getvalues, "config": _config,
        "put": _put, "delete": _delete,
    }, "the config service's operations")


def config_handler(store: ConfigStore, notify: Callable[[int, list[str]], Awaitable[None]]
                   ) -> Handler[ConfigRequest, ConfigResponse]:
    """``notify(version, types)`` is awaited after every change."""

    async def handle(request: ConfigRequest, ctx: Context) -> ConfigResponse:
        text = request.value_format == "text"
        if text and request.values:
            request = request.model_copy(update={"values": text_values.stored(request.values)})
        response, changed = await asyncio.to_thread(
            CONFIG_OPERATIONS[request.operation], store, request)
        if text:
            response = text_values.answered(response)
        response.end_of_stream = True
        if changed:
            assert response.version is not None  # a change always answers with its version
            log.info("id=%s %s %s -> version %d", ctx.id, request.operation,
                     ",".join(sorted(set(changed))), response.version)
            await notify(response.version, changed)
        return response

    return handle


# --- keys' operations: each runs on a worker thread (SQLite) and gives the answer and
# whether it changed users or keys.

KeysChanged = tuple[KeysResponse, bool]


def _add_user(store: KeyStore, request: KeysRequest) -> KeysChanged:
    return KeysResponse(users=[store.add_user(request.owner)]), True


def _list_users(store: KeyStore, request: KeysRequest) -> KeysChanged:
    return KeysResponse(users=store.users()), False


def _create_key(store: KeyStore, request: KeysRequest) -> KeysChanged:
    _need(request.owner, "create-key needs owner: the user the key is for")
    key, secret = store.create_key(request.owner, request.role, request.name,
                                   request.expires, request.limits)
    return KeysResponse(key=key, secret=secret), True


def _list_keys(store: KeyStore, request: KeysRequest) -> KeysChanged:
    return KeysResponse(keys=store.keys(request.owner)), False


def _revoke_key(store: KeyStore, request: KeysRequest) -> KeysChanged:
    _need(request.key_id, "revoke-key needs key_id")
    return KeysResponse(key=store.revoke(request.key_id)), True


def _verifiers(store: KeyStore, request: KeysRequest) -> KeysChanged:
    return KeysResponse(verifiers=store.verifiers()), False


def _record_use(store: KeyStore, request: KeysRequest) -> KeysChanged:
    # How keys are used changes nothing a gateway checks: no notice.
    store.record_use(request.uses)
    store.record_usage(request.usage)
    return KeysResponse(), False


def _usage(store: KeyStore, request: KeysRequest) -> KeysChanged:
    return KeysResponse(usage=store.usage(request.days, request.owner)), False


KEYS_OPERATIONS: Mapping[KeysOperation, Callable[[KeyStore, KeysRequest], KeysChanged]] \
    = per_operation(KeysRequest, {
        "add-user": _add_user, "list-users": _list_users, "create-key": _create_key,
        "list-keys": _list_keys, "revoke-key": _revoke_key, "verifiers": _verifiers,
        "record-use": _record_use, "usage": _usage,
    }, "the keys service's operations")


def keys_handler(store: KeyStore, notify: Callable[[], Awaitable[None]]
                 ) -> Handler[KeysRequest, KeysResponse]:
    """``notify()`` is awaited after every change to users or keys."""

    async def handle(request: KeysRequest, ctx: Context) -> KeysResponse:
        response, changed = await asyncio.to_thread(
            KEYS_OPERATIONS[request.operation], store, request)
        if changed:
            # The key's id, never the key: logs are read by more people than keys.
            log.info("id=%s keys %s %s%s", ctx.id, request.operation, request.owner,
                     f" {response.key.id} ({response.key.role})" if response.key else "")
            await notify()
        return response

    return handle


async def config_services(runtime: Runtime) -> list[Service]:
    path = Path(runtime.settings.tg_data_dir) / "config.db"
    store = await asyncio.to_thread(ConfigStore, path)
    keys = await asyncio.to_thread(KeyStore, path)

    async def notify(version: int, types: list[str]) -> None:
        await runtime.publish(CONFIG_NOTIFY_TOPIC,
                              ConfigNotify(version=version, types=sorted(set(types))))

    async def keys_changed() -> None:
        # The config version stays: config watchers that saw it already ignore this.
        await notify(await asyncio.to_thread(store.version), [KEYS_CHANGED])

    await asyncio.to_thread(seed, store)
    # Announce the current version, so watchers that started before this service
    # (and found nobody to ask) read their configuration (and gateways their keys) now.
    version, types = await asyncio.gather(asyncio.to_thread(store.version),
                                          asyncio.to_thread(store.types))
    await notify(version, [*types, KEYS_CHANGED])
    log.info("config at %s, version %d", path, version)
    return [Service(NAME, ConfigRequest, ConfigResponse, config_handler(store, notify),
                    global_flow=CONFIG_FLOW),
            Service("keys", KeysRequest, KeysResponse, keys_handler(keys, keys_changed),
                    global_flow=KEYS_FLOW),
            Service("flow", FlowRequest, FlowResponse, flow_handler(store, notify),
                    global_flow=FLOW_SERVICE_FLOW)]


SPEC = ProcessorSpec(NAME, ConfigSettings, config_services)
