"""tg-start's replicas: which parts may run as several processes, and their names."""
import pytest

from trustgraph.run.replicas import ReplicasError, replica_counts, replica_name
from trustgraph.run.start import StartSettings, load_settings

PARTS = ["config", "prompt+text-completion+document-rag", "vector-store", "gateway"]


def test_a_part_or_a_member_of_its_group_is_replicated_as_that_process():
    assert replica_counts(["config=3"], PARTS, {}) == {"config": 3}
    assert replica_counts(["document-rag=2"], PARTS, {}) == \
        {"prompt+text-completion+document-rag": 2}
    assert replica_counts(["config=1"], PARTS, {}) == {}


@pytest.mark.parametrize("entry, message", [
    ("config", "not NAME=N"), ("config=0", "not NAME=N"), ("config=two", "not NAME=N"),
    ("extract=2", "'extract' is not among the parts being started"),
    ("gateway=2", "gateway cannot run as 2 processes: it listens on one port"),
    ("vector-store=2", "one process owns the Qdrant Edge shards"),
])
def test_what_cannot_be_replicated_is_refused_saying_why(entry, message):
    with pytest.raises(ReplicasError, match=message):
        replica_counts([entry], PARTS, {})


def test_the_vector_store_is_replicable_against_a_qdrant_server():
    assert replica_counts(["vector-store=2"], PARTS, {"QDRANT_URL": "http://q:6333"}) == \
        {"vector-store": 2}


def test_replicas_come_from_the_flag_or_the_environment(monkeypatch):
    monkeypatch.setenv("TG_REPLICAS", "config=2, document-rag=3")
    assert StartSettings().tg_replicas == ["config=2", "document-rag=3"]
    settings = load_settings(StartSettings, ["--replicas", "text-completion=2"], "t")
    assert settings.tg_replicas == ["text-completion=2"]


def test_replica_names_keep_the_first_as_the_part_is_named():
    assert [replica_name("decoder", i) for i in range(3)] == \
        ["decoder", "decoder.1", "decoder.2"]
