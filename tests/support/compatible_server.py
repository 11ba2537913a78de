"""The OpenAI-compatible presets (vllm, lmstudio, llamafile, tgi): each is the openai
adapter at another address, so each runs against openai_server.py's server, reached
through the preset's own base-URL setting."""
from .openai_server import OpenAiServer


def preset_case(provider: str, **settings: str) -> type:
    class Case:
        name = provider
        server = OpenAiServer
        model = OpenAiServer.model

        @staticmethod
        def settings(server: OpenAiServer) -> dict:
            return {f"{provider}_base_url": server.base_url, **settings}

    Case.provider = provider
    return Case


CASES = [preset_case("vllm", tg_llm_model="served-model"),
         preset_case("lmstudio", tg_llm_model="qwen2.5-7b-instruct"),
         preset_case("llamafile"),
         preset_case("tgi", tgi_api_key="hf_test")]
