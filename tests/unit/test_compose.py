"""docker-compose.yaml (the distributed form) runs what the embedded stack runs."""
from pathlib import Path

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
