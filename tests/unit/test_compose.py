"""docker-compose.yaml (the distributed form) runs what the embedded stack runs."""
from pathlib import Path

import pytest
import yaml

from trustgraph.run import registry

COMPOSE = Path(__file__).parents[2] / "docker-compose.yaml"


def test_compose_runs_every_processor_of_the_default_stack_in_a_container_of_its_own():
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    wanted = {name for entry in registry.DEFAULT_STACK for name in registry.members(entry)}
    assert wanted <= set(services)
    for name in wanted:
        assert services[name]["command"].endswith(f"tg-run {name}\"")
        assert services[name]["environment"]["PULSAR_URL"].startswith("pulsar://")


def test_what_compose_replicates_may_be_replicated():
    """``deploy.replicas`` only where ``tg-start --replicas`` allows it with compose's
    servers (QDRANT_URL set), and the gateway, bound to one port, once."""
    from trustgraph.run.replicas import ReplicasError, replica_counts
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    replicated = {name: service["deploy"]["replicas"] for name, service in services.items()
                  if service.get("deploy", {}).get("replicas", 1) > 1}
    assert {"document-rag", "text-completion"} <= set(replicated)
    parts = [name for name in services if name in registry.RUNNABLES]
    environment = services["gateway"]["environment"]
    entries = [f"{name}={count}" for name, count in replicated.items()]
    assert replica_counts(entries, parts, environment) == replicated
    with pytest.raises(ReplicasError, match="one port"):
        replica_counts(["gateway=2"], parts, environment)
    assert "deploy" not in services["gateway"]
