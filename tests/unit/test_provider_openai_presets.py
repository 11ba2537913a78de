"""Azure OpenAI and the OpenAI-compatible presets: what each sends where, from which
variables, beyond the provider contract they all pass."""
import pytest

from tests.support.azure_server import AzureServer
from tests.support.openai_server import OpenAiServer
from trustgraph.model.text_completion.choice import provider_module
from trustgraph.model.text_completion.provider import Options, Usage

SETTINGS = Options()  # a request asking nothing of its own: the settings apply

DEFAULT_URLS = {"vllm": "http://localhost:8000/v1", "lmstudio": "http://localhost:1234/v1",
                "llamafile": "http://localhost:8080/v1", "tgi": "http://localhost:8080/v1"}


@pytest.fixture
async def server(request):
    server = await getattr(request, "param", OpenAiServer)().start()
    yield server
    await server.stop()


async def answer(provider, prompt="[tokens=2]"):
    return [piece async for piece in provider.stream("Be terse.", prompt, SETTINGS)]


@pytest.mark.parametrize("name", sorted(DEFAULT_URLS))
def test_presets_default_to_the_servers_usual_address(name):
    settings = provider_module(name).Settings(tg_llm_model="m")
    assert getattr(settings, f"{name}_base_url") == DEFAULT_URLS[name]


@pytest.mark.parametrize("name", ["vllm", "lmstudio"])
def test_presets_that_serve_a_named_model_say_so_when_none_is_set(name):
    module = provider_module(name)
    with pytest.raises(SystemExit, match="TG_LLM_MODEL"):
        module.make(module.Settings())


async def test_preset_url_and_key_come_from_the_environment(server, monkeypatch):
    monkeypatch.setenv("VLLM_BASE_URL", server.base_url)
    monkeypatch.setenv("VLLM_API_KEY", "vllm-key")
    monkeypatch.setenv("TG_LLM_MODEL", "meta-llama/Llama-3.1-8B-Instruct")
    module = provider_module("vllm")
    pieces = await answer(module.make(module.Settings()))
    assert pieces[-1] == Usage(11, 2, server.model)
    assert server.last_headers["Authorization"] == "Bearer vllm-key"
    assert server.last_body["model"] == "meta-llama/Llama-3.1-8B-Instruct"


@pytest.mark.parametrize("name, model", [("tgi", "tgi"), ("llamafile", "LLaMA_CPP")])
async def test_single_model_servers_need_no_model_name(server, name, model):
    module = provider_module(name)
    await answer(module.make(module.Settings(**{f"{name}_base_url": server.base_url})))
    assert server.last_body["model"] == model


@pytest.mark.parametrize("server", [AzureServer], indirect=True)
async def test_azure_from_its_usual_variables(server, monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", server.url)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", server.api_key)
    monkeypatch.setenv("AZURE_OPENAI_DEPLOYMENT", server.deployment)
    module = provider_module("azure")
    pieces = await answer(module.make(module.Settings()))
    assert "".join(pieces[:-1]) == "tok0 tok1 "
    assert pieces[-1] == Usage(11, 2, server.model)  # the model behind the deployment
    assert server.last_body["messages"][0] == {"role": "system", "content": "Be terse."}


@pytest.mark.parametrize("server", [AzureServer], indirect=True)
async def test_azure_api_version_and_deployment_settings(server):
    server.deployment = "other-deployment"
    module = provider_module("azure")
    base = {"azure_openai_endpoint": server.url, "azure_openai_api_key": server.api_key,
            "azure_openai_deployment": "ignored-deployment"}
    await answer(module.make(module.Settings(**base, tg_llm_model="other-deployment")))
    await answer(module.make(module.Settings(**base, tg_llm_model="other-deployment",
                                             openai_api_version="2025-01-01-preview")))
    assert server.calls == [("other-deployment", "2024-10-21"),
                            ("other-deployment", "2025-01-01-preview")]


def test_azure_without_endpoint_or_deployment_says_what_is_missing(monkeypatch):
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    module = provider_module("azure")
    with pytest.raises(SystemExit, match="AZURE_OPENAI_ENDPOINT"):
        module.make(module.Settings(tg_llm_model="d"))
