"""The OpenAI-compatible presets (vllm, lmstudio, llamafile, tgi): each is the openai
adapter at another address, so each runs against openai_server.py's server, reached
through the preset's own base-URL setting. The servers differ in how they take a
JSON Schema: vLLM and LM Studio as OpenAI does, TGI and llamafile each in its own
way, which their servers here read (and nothing else)."""
from .openai_server import OpenAiServer


class TgiServer(OpenAiServer):
    """TGI's grammar: ``response_format`` ``{"type": "json_object", "value": ...}``."""

    def shape(self, body: dict) -> dict | None:
        format = body.get("response_format") or {}
        if format.get("type") not in ("json", "json_object") or "value" not in format:
            return None
        return {"mechanism": "response_format json_object value", "schema": format["value"]}


class LlamafileServer(OpenAiServer):
    """llama.cpp's server as llamafile bundles it: ``response_format`` ``{"type":
    "json_object", "schema": ...}``."""

    def shape(self, body: dict) -> dict | None:
        format = body.get("response_format") or {}
        if format.get("type") != "json_object" or "schema" not in format:
            return None
        return {"mechanism": "response_format json_object schema", "schema": format["schema"]}


def preset_case(provider: str, server: type[OpenAiServer], mechanism: str,
                **settings: str) -> type:
    class Case:
        name = provider
        model = OpenAiServer.model

        @staticmethod
        def settings(server: OpenAiServer) -> dict:
            return {f"{provider}_base_url": server.base_url, **settings}

    Case.provider = provider
    Case.server = server
    Case.mechanism = mechanism
    return Case


CASES = [preset_case("vllm", OpenAiServer, "response_format json_schema",
                     tg_llm_model="served-model"),
         preset_case("lmstudio", OpenAiServer, "response_format json_schema",
                     tg_llm_model="qwen2.5-7b-instruct"),
         preset_case("llamafile", LlamafileServer, "response_format json_object schema"),
         preset_case("tgi", TgiServer, "response_format json_object value",
                     tgi_api_key="hf_test")]
