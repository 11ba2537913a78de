"""OpenAI chat completions, and every server that speaks that API (vLLM, LM Studio,
llamafile, TGI, Ollama's /v1), chosen by ``OPENAI_BASE_URL``.

The SDK supplies configuration, auth and retries before the response starts; the
token stream itself is read as raw SSE lines, since parsing every chunk into the
SDK's typed models costs milliseconds per chunk under load (DESIGN §1).
"""
import json
from collections.abc import AsyncIterator

import openai

from ..provider import LlmError, Usage

DEFAULT_MODEL = "gpt-4o-mini"


class OpenAiProvider:
    def __init__(self, api_key: str | None, base_url: str | None, model: str | None,
                 temperature: float, max_tokens: int, max_retries: int = 2) -> None:
        self.model = model or DEFAULT_MODEL
        self.temperature = temperature
        self.max_tokens = max_tokens
        # Local OpenAI-compatible servers need no key, but the SDK insists on one.
        self.client = openai.AsyncOpenAI(api_key=api_key or "not-needed",
                                         base_url=base_url, max_retries=max_retries)

    async def stream(self, system: str, prompt: str) -> AsyncIterator[str | Usage]:
        messages = [{"role": "user", "content": prompt}]
        if system:
            messages.insert(0, {"role": "system", "content": system})
        usage, model = {}, self.model
        try:
            async with self.client.chat.completions.with_streaming_response.create(
                model=self.model, messages=messages, stream=True,
                stream_options={"include_usage": True},
                temperature=self.temperature, max_tokens=self.max_tokens,
            ) as response:
                async for line in response.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    chunk = json.loads(data)
                    if chunk.get("error"):
                        raise LlmError(_error_text(chunk["error"]))
                    for choice in chunk.get("choices") or ():
                        content = (choice.get("delta") or {}).get("content")
                        if content:
                            yield content
                    usage = chunk.get("usage") or usage
                    model = chunk.get("model") or model
        except openai.APIStatusError as error:
            raise LlmError(f"{self.client.base_url} answered {error.status_code}: "
                           f"{_error_text(error.body) or error.message}") from None
        except openai.APIConnectionError as error:
            raise LlmError(f"cannot reach the LLM at {self.client.base_url}: {error}") from None
        except LlmError:
            raise
        except Exception as error:  # the HTTP stream broke mid-way, or sent bad JSON
            raise LlmError(f"LLM stream failed: {type(error).__name__}: {error}") from None
        yield Usage(usage.get("prompt_tokens"), usage.get("completion_tokens"), model)


def _error_text(error: object) -> str:
    if isinstance(error, dict):
        inner = error.get("error", error)
        if isinstance(inner, dict):
            return str(inner.get("message") or inner)
        return str(inner)
    return str(error or "")
