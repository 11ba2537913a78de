"""The config store on its own: items, versions, atomic deletes, WAL, reopening."""
import sqlite3
from types import SimpleNamespace

import pytest

from trustgraph.config.service import ConfigSettings, config_services
from trustgraph.config.store import ConfigStore, NotFound
from trustgraph.schema import CONFIG_FLOW, KEYS_FLOW, ConfigKey, ConfigValue
from trustgraph.schema.flows import FLOW_SERVICE_FLOW


def value(type, key, v):
    return ConfigValue(type=type, key=key, value=v)


def key(type, key):
    return ConfigKey(type=type, key=key)


def test_items_and_versions(tmp_path):
    store = ConfigStore(tmp_path / "config.db")
    assert store.version() == 0
    assert store.put([value("prompt", "a", {"prompt": "A"}), value("flow", "f", [1, "x"])]) == 1
    assert store.put([value("prompt", "b", "B")]) == 2
    assert store.get([key("prompt", "a"), key("flow", "f")]) == (
        [value("prompt", "a", {"prompt": "A"}), value("flow", "f", [1, "x"])], 2)
    assert store.keys("prompt") == (["a", "b"], 2)
    assert store.values("prompt") == ([value("prompt", "a", {"prompt": "A"}),
                                       value("prompt", "b", "B")], 2)
    assert store.everything() == ({"flow": {"f": [1, "x"]},
                                   "prompt": {"a": {"prompt": "A"}, "b": "B"}}, 2)
    assert store.types() == ["flow", "prompt"]
    assert store.put([value("prompt", "a", None)]) == 3  # overwrite, with JSON null
    assert store.get([key("prompt", "a")])[0][0].value is None
    assert store.delete([key("prompt", "a"), key("prompt", "b")]) == 4
    assert store.keys("prompt") == ([], 4)


def test_unknown_keys_are_not_found_and_delete_is_all_or_nothing(tmp_path):
    store = ConfigStore(tmp_path / "config.db")
    store.put([value("prompt", "a", 1)])
    with pytest.raises(NotFound, match="no config item prompt/zz"):
        store.get([key("prompt", "a"), key("prompt", "zz")])
    with pytest.raises(NotFound) as failure:
        store.delete([key("prompt", "a"), key("prompt", "zz")])
    assert failure.value.type == "not-found"
    assert store.keys("prompt") == (["a"], 1)  # nothing deleted, version unchanged


def test_reopened_store_keeps_items_and_version_in_wal_mode(tmp_path):
    path = tmp_path / "data" / "config.db"
    ConfigStore(path).put([value("tool", "t", {"x": 1})])
    store = ConfigStore(path)
    assert store.everything() == ({"tool": {"t": {"x": 1}}}, 1)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_config_is_served_on_one_flow_whatever_tg_flows_says(tmp_path):
    runtime = SimpleNamespace(settings=ConfigSettings(tg_flows="a,b", tg_data_dir=str(tmp_path)),
                              publish=_ignored)
    services = await config_services(runtime)
    assert {s.name: s.global_flow for s in services} == {
        "config": CONFIG_FLOW, "keys": KEYS_FLOW, "flow": FLOW_SERVICE_FLOW}


async def _ignored(topic, record):
    pass
