"""Which LLM answers when none is configured, and what tg-start says about it."""
import pytest

from trustgraph.model.text_completion import choice, demo
from trustgraph.model.text_completion.choice import chosen_provider
from trustgraph.model.text_completion.local import provider as local


@pytest.fixture
def unconfigured(monkeypatch):
    for name in ("TG_LLM", "OPENAI_API_KEY", "OPENAI_BASE_URL", "TG_LOCAL_MODEL",
                 "TG_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)


def test_no_llm_configured_is_the_bundled_demo_model(unconfigured):
    assert demo.available()  # make install installs it
    assert chosen_provider([]) == "local"
    chosen = choice.current()
    assert (chosen.provider, chosen.model, chosen.demo) == (
        "local", "SmolLM2-135M-Instruct.Q4_1", True)
    first, how = chosen.lines()
    assert first == "local: SmolLM2-135M-Instruct.Q4_1, a tiny offline demo model: " \
                    "answers stream for real but are often wrong"
    assert "TG_LLM=openai with OPENAI_API_KEY" in how and "TG_LOCAL_MODEL" in how
    assert "tiny offline demo model" in chosen.as_json()["notice"]


def test_a_configured_provider_replaces_it(unconfigured, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert chosen_provider([]) == "openai"
    assert choice.current().lines() == ["openai"]
    monkeypatch.setenv("TG_LLM", "ollama")
    monkeypatch.setenv("TG_LLM_MODEL", "qwen3:8b")
    assert choice.current().lines() == ["ollama: qwen3:8b"]


def test_a_gguf_of_ones_own_is_no_demo(unconfigured, monkeypatch, tmp_path):
    monkeypatch.setenv("TG_LOCAL_MODEL", str(tmp_path / "Qwen3-8B-Q4_K_M.gguf"))
    chosen = choice.current()
    assert (chosen.model, chosen.demo, chosen.notice) == ("Qwen3-8B-Q4_K_M", False, "")
    assert chosen.lines() == ["local: Qwen3-8B-Q4_K_M"]


def test_without_llama_cpp_or_the_model_no_llm_is_configured(unconfigured, monkeypatch):
    monkeypatch.setattr(demo, "bundled_model", lambda: None)
    assert chosen_provider([]) == ""
    assert choice.current().lines()[0].startswith("NONE configured")


@pytest.mark.parametrize("cores, threads", [(1, 1), (2, 1), (4, 3), (64, 8)])
def test_threads_leave_the_stack_a_core(cores, threads):
    assert local.default_threads(cores) == threads
