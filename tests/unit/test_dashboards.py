"""deploy/grafana's dashboard and prometheus.yml stay true to the platform: every
metric a panel queries is one the processes register, and the scrape config's
targets are the services docker-compose.yaml runs, on the ports it gives them."""
import json
import re
from pathlib import Path

import yaml
from prometheus_client import REGISTRY

import trustgraph.base.metrics  # noqa: F401  (registers the processors' metrics)
import trustgraph.gateway.app  # noqa: F401  (the gateway's and its APIs')

ROOT = Path(__file__).parents[2]
DASHBOARD = ROOT / "deploy/grafana/dashboards/trustgraph.json"
PROMETHEUS = ROOT / "prometheus.yml"
COMPOSE = ROOT / "docker-compose.yaml"
PROMETHEUS_OWN = {"up"}  # what Prometheus itself records per target
SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_count", "_sum")}


def exported() -> set[str]:
    """The sample names the registered metrics are scraped as."""
    names = set()
    for family in REGISTRY.collect():
        names |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
    return names


def queried() -> set[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert exprs
    functions = {"sum", "by", "rate", "increase", "histogram_quantile", "le"}
    words = {word for expr in exprs for word in re.findall(r"[a-z_][a-z0-9_]*(?=[{\[ )])", expr)}
    labels = {label for expr in exprs for label in re.findall(r"\(([a-z_, ]+)\)", expr)}
    named_labels = {name.strip() for group in labels for name in group.split(",")}
    return words - functions - named_labels


def test_the_dashboards_queries_name_metrics_the_platform_exports():
    names = queried()
    assert {"tg_llm_tokens_total", "tg_llm_cost_dollars_total", "tg_requests_total"} <= names
    missing = names - exported() - PROMETHEUS_OWN
    assert not missing, f"queried but never exported: {sorted(missing)}"


def test_the_scrape_targets_are_the_compose_services():
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    processors = {name for name, service in services.items()
                  if "tg-run" in str(service.get("command", "")) and name != "gateway"}
    config = yaml.safe_load(PROMETHEUS.read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    (gateway,) = jobs["gateway"]["static_configs"]
    port = services["gateway"]["ports"][0].split(":")[-1]
    assert gateway["targets"] == [f"gateway:{port}"]
    (lookup,) = jobs["processors"]["dns_sd_configs"]
    assert set(lookup["names"]) == processors
    for name in processors:
        assert str(services[name]["environment"]["TG_METRICS_PORT"]) == str(lookup["port"])
    assert {"prometheus", "grafana"} <= set(services)
