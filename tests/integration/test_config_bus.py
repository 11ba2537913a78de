"""The config service over a real pulsar-lite broker: operations, versions,
persistence across a restart, and change notifications reaching a watcher."""
import asyncio
import uuid

import pytest

from tests.support.waiting import answered
from trustgraph.base import ConfigClient, ConfigWatcher, Processor, ServiceError
from trustgraph.config.service import SPEC as CONFIG_SPEC
from trustgraph.config.service import ConfigSettings
from trustgraph.schema import ConfigRequest, ConfigResponse, Record


@pytest.fixture
async def client(bus):
    return await ConfigClient.connect(bus, f"test-{uuid.uuid4().hex[:8]}", timeout=10)


@pytest.fixture
async def start_config(broker, tmp_path, client):
    """Starts config processors on one data dir; all are stopped at the end."""
    started = []

    async def start():
        processor = Processor(CONFIG_SPEC, ConfigSettings(pulsar_url=broker.url,
                                                    tg_data_dir=str(tmp_path)))
        started.append(processor)
        await processor.start()
        await answered(client.everything, "config", timeout=10, attempt=0.2)
        return processor

    yield start
    for processor in started:
        await processor.stop()


@pytest.fixture
async def config(start_config):
    return await start_config()


class Changes:
    """A watcher's callback that records each snapshot and lets a test wait for one."""

    def __init__(self) -> None:
        self.seen: list[tuple[dict, int]] = []
        self._changed = asyncio.Condition()

    async def __call__(self, snapshot: dict, version: int) -> None:
        async with self._changed:
            self.seen.append((snapshot, version))
            self._changed.notify_all()

    async def version(self, version: int, timeout: float = 10.0) -> dict:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: self.seen and self.seen[-1][1] >= version)
            return self.seen[-1][0]


async def test_put_get_list_delete_and_versions(config, client):
    assert await client.list("prompt") == []
    assert await client.put("prompt", "greet", {"prompt": "Hello {{ name }}"}) == 1
    assert await client.put_many("prompt", {"a": "A", "b": ["B", 2]}) == 2
    assert await client.put("tool", "search", {"limit": 3}) == 3
    assert await client.get("prompt", "greet") == {"prompt": "Hello {{ name }}"}
    assert await client.list("prompt") == ["a", "b", "greet"]
    assert await client.values("prompt") == {
        "a": "A", "b": ["B", 2], "greet": {"prompt": "Hello {{ name }}"}}
    everything, version = await client.everything()
    assert version == 3 and everything["tool"] == {"search": {"limit": 3}}
    assert await client.delete("prompt", "a", "b") == 4
    assert await client.list("prompt") == ["greet"]


async def test_unknown_items_and_bad_requests_are_clear_errors(config, client):
    with pytest.raises(ServiceError) as failure:
        await client.get("prompt", "nope")
    assert (failure.value.error.type, failure.value.error.message) == (
        "not-found", "no config item prompt/nope")
    with pytest.raises(ServiceError, match="not-found"):
        await client.delete("prompt", "nope")
    with pytest.raises(ServiceError, match="bad-request: list needs a type"):
        await client.request(ConfigRequest(operation="list"))
    with pytest.raises(ServiceError, match="every value needs a non-empty type and key"):
        await client.put("", "k", 1)
    # An unknown operation fails validation of the request record itself.
    with pytest.raises(ServiceError, match="(?s)bad-request.*operation.*rename"):
        await client.requester.call(AnyOperation(operation="rename"), ConfigResponse)


class AnyOperation(Record):
    operation: str


async def test_items_and_version_survive_a_restart(start_config, client):
    first = await start_config()
    await client.put("flow", "default", {"model": "m1"})
    version = await client.put("prompt", "p", {"prompt": "x"})
    await first.stop()
    await start_config()
    assert await client.get("flow", "default") == {"model": "m1"}
    assert (await client.everything())[1] == version
    assert await client.put("prompt", "q", {"prompt": "y"}) == version + 1


async def test_watcher_reads_at_start_and_after_each_relevant_change(config, client, bus):
    await client.put("prompt", "p", {"prompt": "one"})
    changes = Changes()
    watcher = ConfigWatcher(bus, client, ["prompt"], changes, f"watch-{uuid.uuid4().hex[:8]}")
    assert await watcher.start(wait=5)
    assert changes.seen == [({"prompt": {"p": {"prompt": "one"}}}, 1)]

    await client.put("tool", "t", {"x": 1})  # not watched: no callback
    version = await client.put("prompt", "p", {"prompt": "two"})
    assert await changes.version(version) == {"prompt": {"p": {"prompt": "two"}}}
    # Notifications arrive in order, so the tool change was seen (and skipped) first.
    assert [v for _, v in changes.seen] == [1, version]

    version = await client.delete("prompt", "p")
    assert await changes.version(version) == {"prompt": {}}


async def test_watcher_started_before_the_config_service_catches_up(start_config, client,
                                                                    bus):
    changes = Changes()
    watcher = ConfigWatcher(bus, client, ["prompt"], changes, f"watch-{uuid.uuid4().hex[:8]}")
    assert not await watcher.start(wait=0)  # nobody answers yet
    seeded = await start_config()
    await client.put("prompt", "p", "early")
    assert await changes.version(1) == {"prompt": {"p": "early"}}
    await seeded.stop()
    changes.seen.clear()
    watcher.version = None  # as if this watcher had never read config
    # A restarted config service announces itself; the watcher reads at once.
    await start_config()
    assert await changes.version(1) == {"prompt": {"p": "early"}}
