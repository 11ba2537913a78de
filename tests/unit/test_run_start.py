"""tg-start's settings, its choice of parts, and how it fails."""
import pytest

from trustgraph.pubsub.embedded import BrokerUnavailable
from trustgraph.run import registry, start
from trustgraph.run.start import StartError, StartSettings, module_of, plan


def test_settings_come_from_the_environment_and_flags(monkeypatch):
    monkeypatch.setenv("TG_PROCESSORS", "gateway, text-completion")
    monkeypatch.setenv("TG_GATEWAY_PORT", "9999")
    settings = StartSettings()
    assert settings.tg_processors == ["gateway", "text-completion"]
    assert settings.tg_gateway_port == 9999 and settings.external_broker is None
    settings = start.load_settings(StartSettings, ["--tg-processors", "config"], "t")
    assert settings.tg_processors == ["config"]


def test_default_is_the_registry_stack(monkeypatch):
    monkeypatch.delenv("TG_PROCESSORS", raising=False)
    assert StartSettings().tg_processors == registry.DEFAULT_STACK
    names = [name for entry in registry.DEFAULT_STACK for name in registry.members(entry)]
    assert set(names) <= set(registry.RUNNABLES) and len(set(names)) == len(names)
    # prompt calls text-completion on every request: one process, no bus hop
    assert any({"prompt", "text-completion"} <= set(registry.members(entry))
               for entry in registry.DEFAULT_STACK)
    # everything a user needs, from loading documents to asking about them
    assert {"librarian", "decoder", "vector-store", "triples-store", "graph-rag",
            "document-rag", "gateway"} <= set(names)


def test_plan_skips_what_is_not_installed_and_starts_the_gateway_last(monkeypatch, capsys):
    monkeypatch.setitem(registry.RUNNABLES, "ghost", "trustgraph.ghost.service:main")
    parts = plan(["gateway", "ghost", "text-completion", "text-completion-nosuch",
                  "text-completion-openai", "text-completion"], StartSettings())
    assert parts == ["text-completion", "text-completion-openai", "gateway"]
    out = capsys.readouterr().out
    assert "skipping ghost: trustgraph.ghost.service is not installed" in out
    assert "skipping text-completion-nosuch" in out


def test_unknown_names_are_refused():
    with pytest.raises(StartError, match="unknown part 'nope'.*known: .*config"):
        module_of("nope")
    assert module_of("text-completion-vertexai-claude") == \
        "trustgraph.model.text_completion.vertexai_claude.provider"


def test_an_unknown_part_exits_1(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TG_DATA_DIR", str(tmp_path))
    assert start.main(["--tg-processors", "nope"]) == 1
    assert "unknown part 'nope'" in capsys.readouterr().err


def test_no_broker_for_this_platform_is_said_plainly(tmp_path, monkeypatch, capsys):
    class NoBroker:
        def __init__(self, data_dir, port):
            self.url, self.process = f"pulsar://127.0.0.1:{port}", None

        def spawn(self):
            raise BrokerUnavailable("the embedded broker runs on Linux x86-64 only; "
                                    "set PULSAR_URL")

        def stop(self):
            pass

    monkeypatch.setattr(start, "EmbeddedBroker", NoBroker)
    monkeypatch.setenv("TG_DATA_DIR", str(tmp_path))
    assert start.main(["--tg-processors", "text-completion"]) == 1
    assert "cannot start the embedded broker: the embedded broker runs on Linux " \
        "x86-64 only; set PULSAR_URL" in capsys.readouterr().err
    assert list((tmp_path / "run").iterdir()) == []


@pytest.mark.parametrize("value, kept", [(None, True), ("true", True), ("false", False),
                                         ("0", False), ("off", False)])
def test_lazy_rag_answers_with_the_others_unless_its_switch_is_off(monkeypatch, capsys,
                                                                  value, kept):
    if value is None:
        monkeypatch.delenv("LAZY_RAG_ENABLED", raising=False)
    else:
        monkeypatch.setenv("LAZY_RAG_ENABLED", value)
    [answering] = [e for e in registry.DEFAULT_STACK if "graph-rag" in registry.members(e)]
    assert "lazy-rag" in registry.members(answering)
    [group] = [part for part in plan([answering], StartSettings()) if "graph-rag" in part]
    assert ("lazy-rag" in registry.members(group)) == kept
    assert ("skipping lazy-rag: LAZY_RAG_ENABLED is false" in capsys.readouterr().out) \
        == (not kept)


@pytest.mark.parametrize("parts, pulsar_url, checks_keys", [
    (["config", "text-completion", "gateway"], "", True),
    (["librarian+config", "gateway"], "", True),
    (["text-completion", "gateway"], "", False),  # no config service anywhere
    (["text-completion", "gateway"], "pulsar://elsewhere:6650", True),  # perhaps there
])
def test_the_gateway_checks_keys_when_a_config_service_may_keep_them(
        tmp_path, monkeypatch, parts, pulsar_url, checks_keys):
    import asyncio
    monkeypatch.delenv("TG_GATEWAY_KEYS", raising=False)
    settings = StartSettings(tg_data_dir=str(tmp_path),
                             **({"pulsar_url": pulsar_url} if pulsar_url else {}))
    platform = start.Platform(settings, parts, start.RunDir(tmp_path / "run"),
                              asyncio.Event())
    gateway, = [child for child in platform.children if child.name == "gateway"]
    assert (gateway.env.get("TG_GATEWAY_KEYS") != "false") is checks_keys
    assert gateway.env["PULSAR_URL"] == (pulsar_url or platform.broker.broker.url)


def test_the_children_read_what_tg_start_was_given(tmp_path, monkeypatch):
    """Every child reads the settings every process has as tg-start read them, its flags
    included: one switch, parsed once, for tg-start, the gateway and the processor."""
    import asyncio
    monkeypatch.delenv("TG_GATEWAY_KEYS", raising=False)
    monkeypatch.setenv("LAZY_RAG_ENABLED", "off")
    settings = start.load_settings(StartSettings, [
        "--tg-data-dir", str(tmp_path), "--tg-flows", "default,other",
        "--tg-request-timeout", "30", "--tg-gateway-keys"], "t")
    assert not settings.lazy_rag_enabled and "lazy-rag" not in plan(["lazy-rag"], settings)
    platform = start.Platform(settings, ["text-completion", "gateway"],
                              start.RunDir(tmp_path / "run"), asyncio.Event())
    for child in platform.children:
        assert (child.env["LAZY_RAG_ENABLED"], child.env["TG_FLOWS"]) == ("false", "default,other")
        assert child.env["TG_REQUEST_TIMEOUT"] == "30.0"
        # asked for, though no config service of ours keeps keys
        assert child.env["TG_GATEWAY_KEYS"] == "true"


def test_tg_start_says_where_traces_go(monkeypatch, tmp_path):
    for variable in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                     "TG_TRACING", "TG_TRACE_SAMPLE", "TG_TRACE_STORE_MB"):
        monkeypatch.delenv(variable, raising=False)
    assert start._traces(StartSettings(), tmp_path) == \
        f"{tmp_path / 'traces.db'} (tg-list-traces, tg-show-trace ID); those clients " \
        f"ask for, and 10% of the rest"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    assert start._traces(StartSettings(tg_trace_store_mb=0, tg_trace_sample=0.25),
                         tmp_path) == "OTLP http://collector:4318; those clients ask for, " \
                                      "and 25% of the rest"
    assert start._traces(StartSettings(tg_tracing=False), tmp_path) == ""
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    assert start._traces(StartSettings(tg_trace_store_mb=0), tmp_path) == ""  # nowhere
