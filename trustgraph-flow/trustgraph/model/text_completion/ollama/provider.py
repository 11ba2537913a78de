"""Ollama's native chat API: ``POST /api/chat`` streaming NDJSON, one
``{"message": {"content": ...}, "done": false}`` line per token and a last
``{"done": true, "prompt_eval_count", "eval_count"}`` line; errors as an
``{"error": ...}`` line or an HTTP status. A JSON Schema goes in ``format``, which
Ollama turns into a grammar that constrains sampling. Ollama ships no async SDK of its own
that the platform installs, so this speaks the API with aiohttp (it is one POST).

Per line: one ``json.loads`` of the raw bytes, no other parsing (DESIGN §1).
"""
import json
from collections.abc import AsyncGenerator

import aiohttp

from ..provider import (
    DEFAULT_CONNECTIONS,
    LlmError,
    LlmSettings,
    Options,
    Overloaded,
    Usage,
    chosen,
)

DEFAULT_MODEL = "llama3.2"
OVERLOAD_STATUSES = (429, 503)  # 503: Ollama's request queue is full
# No overall deadline (an answer may take minutes); a silent server is a dead one.
TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=300)


class Settings(LlmSettings):
    ollama_host: str = "http://localhost:11434"


def make(settings: Settings) -> "OllamaProvider":
    host = settings.ollama_host.rstrip("/")
    if "://" not in host:  # OLLAMA_HOST is often written as host:port
        host = f"http://{host}"
    return OllamaProvider(host, settings.tg_llm_model or DEFAULT_MODEL,
                          settings.tg_llm_temperature, settings.tg_llm_max_tokens,
                          settings.tg_llm_connections)


class OllamaProvider:
    def __init__(self, host: str, model: str, temperature: float, max_tokens: int,
                 connections: int = DEFAULT_CONNECTIONS) -> None:
        self.url = f"{host}/api/chat"
        self.connections = connections  # the HTTP pool's size (TG_LLM_CONNECTIONS)
        self.model = model  # the settings a request's ``Options`` may replace
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.session: aiohttp.ClientSession | None = None  # made on the first request's loop

    async def stream(self, system: str, prompt: str, options: Options
                     ) -> AsyncGenerator[str | Usage, None]:
        messages = [{"role": "user", "content": prompt}]
        if system:
            messages.insert(0, {"role": "system", "content": system})
        sampling: dict[str, object] = {
            "temperature": chosen(options.temperature, self.temperature),
            "num_predict": chosen(options.max_tokens, self.max_tokens)}
        if options.stop:
            sampling["stop"] = options.stop
        model = chosen(options.model, self.model)
        body = {"model": model, "messages": messages, "stream": True, "options": sampling}
        if options.schema is not None:
            body["format"] = options.schema
        if self.session is None or self.session.closed:
            self.session = aiohttp.ClientSession(
                timeout=TIMEOUT,
                connector=aiohttp.TCPConnector(limit=self.connections, limit_per_host=0))
        final = None
        try:
            async with self.session.post(self.url, json=body) as response:
                if response.status != 200:
                    kind = Overloaded if response.status in OVERLOAD_STATUSES else LlmError
                    raise kind(f"Ollama at {self.url} answered {response.status}: "
                               f"{_error_text(await response.text())}")
                async for line in response.content:  # closed on exit, even when cancelled
                    if not line.strip():
                        continue
                    chunk = json.loads(line)
                    if "error" in chunk:
                        raise LlmError(f"Ollama stream error: {chunk['error']}")
                    text = (chunk.get("message") or {}).get("content")
                    if text:
                        yield text
                    if chunk.get("done"):
                        final = chunk
                        break
        except LlmError:
            raise
        except aiohttp.ClientConnectorError as error:
            raise LlmError(f"cannot reach Ollama at {self.url}: {error}") from None
        except Exception as error:  # the HTTP stream broke mid-way, or sent bad JSON
            raise LlmError(f"Ollama stream failed: {type(error).__name__}: {error}") from None
        if final is None:
            raise LlmError(f"Ollama at {self.url} ended the stream before done")
        yield Usage(final.get("prompt_eval_count"), final.get("eval_count"),
                    final.get("model") or model)

    async def aclose(self) -> None:
        """Close the pooled connections (the process's owner of this provider may;
        otherwise they go when the process does)."""
        if self.session is not None:
            await self.session.close()


def _error_text(body: str) -> str:
    try:
        return str(json.loads(body)["error"])
    except (ValueError, KeyError, TypeError):
        return body[:500]
