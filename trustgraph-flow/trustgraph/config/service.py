"""The config processor: typed, versioned configuration (prompts, flows, tools) kept
in ``TG_DATA_DIR/config.db``, served on the bus, each change announced on
``CONFIG_NOTIFY_TOPIC`` so processors apply edits without a restart.

It also serves ``keys``: the users and API keys the gateway checks callers against,
in the same file (``keys.py``); a change to them is announced as ``KEYS_CHANGED``.

Operations are listed in ``trustgraph.schema.config`` and ``trustgraph.schema.keys``.
"""
import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from pydantic import field_validator

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
    ConfigNotify,
    ConfigRequest,
    ConfigResponse,
    KeysRequest,
    KeysResponse,
)

from .keys import KeyStore
from .store import ConfigStore

log = logging.getLogger(__name__)

NAME = "config"


class ConfigSettings(ProcessorSettings):
    @field_validator("tg_flows")
    @classmethod
    def _one_global_flow(cls, flows: list[str]) -> list[str]:
        # Configuration is global (it defines the flows): whatever TG_FLOWS says, the
        # service answers on the one flow every ConfigClient asks on.
        return [CONFIG_FLOW]


def _need(condition: object, message: str) -> None:
    if not condition:
        raise BadRequest(message)


def config_handler(store: ConfigStore, notify: Callable[[int, list[str]], Awaitable[None]]
                   ) -> Handler[ConfigRequest, ConfigResponse]:
    """``notify(version, types)`` is awaited after every change."""

    def run(request: ConfigRequest) -> tuple[ConfigResponse, list[str]]:
        """Runs on a worker thread (SQLite); returns the answer and the types changed."""
        match request.operation:
            case "get":
                _need(request.keys, "get needs keys: [{type, key}, ...]")
                values, version = store.get(request.keys)
                return ConfigResponse(values=values, version=version), []
            case "list":
                _need(request.type, "list needs a type")
                keys, version = store.keys(request.type)
                return ConfigResponse(directory=keys, version=version), []
            case "getvalues":
                _need(request.type, "getvalues needs a type")
                values, version = store.values(request.type)
                return ConfigResponse(values=values, version=version), []
            case "config":
                config, version = store.everything()
                return ConfigResponse(config=config, version=version), []
            case "put":
                _need(request.values, "put needs values: [{type, key, value}, ...]")
                _need(all(v.type and v.key for v in request.values),
                      "every value needs a non-empty type and key")
                version = store.put(request.values)
                return ConfigResponse(version=version), [v.type for v in request.values]
            case "delete":
                _need(request.keys, "delete needs keys: [{type, key}, ...]")
                version = store.delete(request.keys)
                return ConfigResponse(version=version), [k.type for k in request.keys]

    async def handle(request: ConfigRequest, ctx: Context) -> ConfigResponse:
        response, changed = await asyncio.to_thread(run, request)
        response.end_of_stream = True
        if changed:
            assert response.version is not None  # a change always answers with its version
            log.info("id=%s %s %s -> version %d", ctx.id, request.operation,
                     ",".join(sorted(set(changed))), response.version)
            await notify(response.version, changed)
        return response

    return handle


def keys_handler(store: KeyStore, notify: Callable[[], Awaitable[None]]
                 ) -> Handler[KeysRequest, KeysResponse]:
    """``notify()`` is awaited after every change to users or keys (not after
    ``record-use``: how keys are used changes nothing a gateway checks)."""

    def run(request: KeysRequest) -> tuple[KeysResponse, bool]:
        """Runs on a worker thread (SQLite); returns the answer and whether it changed
        users or keys."""
        match request.operation:
            case "add-user":
                return KeysResponse(users=[store.add_user(request.owner)]), True
            case "list-users":
                return KeysResponse(users=store.users()), False
            case "create-key":
                _need(request.owner, "create-key needs owner: the user the key is for")
                key, secret = store.create_key(request.owner, request.role, request.name,
                                               request.expires, request.limits)
                return KeysResponse(key=key, secret=secret), True
            case "list-keys":
                return KeysResponse(keys=store.keys(request.owner)), False
            case "revoke-key":
                _need(request.key_id, "revoke-key needs key_id")
                return KeysResponse(key=store.revoke(request.key_id)), True
            case "verifiers":
                return KeysResponse(verifiers=store.verifiers()), False
            case "record-use":
                store.record_use(request.uses)
                return KeysResponse(), False

    async def handle(request: KeysRequest, ctx: Context) -> KeysResponse:
        response, changed = await asyncio.to_thread(run, request)
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

    # Announce the current version, so watchers that started before this service
    # (and found nobody to ask) read their configuration (and gateways their keys) now.
    version, types = await asyncio.gather(asyncio.to_thread(store.version),
                                          asyncio.to_thread(store.types))
    await notify(version, [*types, KEYS_CHANGED])
    log.info("config at %s, version %d", path, version)
    return [Service(NAME, ConfigRequest, ConfigResponse, config_handler(store, notify)),
            Service("keys", KeysRequest, KeysResponse, keys_handler(keys, keys_changed))]


SPEC = ProcessorSpec(NAME, ConfigSettings, config_services)
