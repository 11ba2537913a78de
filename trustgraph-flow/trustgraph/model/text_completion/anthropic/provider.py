"""Anthropic Messages API (Claude); ``AnthropicProvider`` also serves Claude on
Vertex AI (see ``vertexai_claude``), whose client speaks the same API shape.

The SDK supplies configuration and auth (overload retries are retry.py's). The
token stream is read as raw SSE lines, one ``json.loads`` per event: ``messages.stream``
rebuilds a snapshot of the whole message on every event, and ``create(stream=True)``
builds a typed model per event; both cost far more per chunk than the text we need
(DESIGN §1). Each ``data:`` line carries its own ``type``, so ``event:`` lines are skipped.

A JSON Schema is asked for as a forced tool: one tool whose ``input_schema`` is the
schema, and ``tool_choice`` naming it, so Claude's reply is that tool's input,
streamed as ``input_json_delta`` pieces of JSON text.
"""
import json
from collections.abc import AsyncGenerator
from typing import Any

import anthropic
import httpx2  # the HTTP client the SDK (2.x) is built on, and takes

from ..provider import LlmError, LlmSettings, Options, Overloaded, Usage, chosen

DEFAULT_MODEL = "claude-sonnet-5-5"
OVERLOAD_STATUSES = (429, 503, 529)
OVERLOAD_TYPES = ("overloaded_error", "rate_limit_error")
ANSWER_TOOL = "answer"  # the forced tool whose input is an answer under a schema
ANSWER_TOOL_DESCRIPTION = "Gives the answer, in exactly the shape asked for."


class Settings(LlmSettings):
    anthropic_api_key: str = ""
    anthropic_base_url: str = ""


def pool(settings: LlmSettings) -> httpx2.AsyncClient:
    """The SDK's HTTP client with a pool of TG_LLM_CONNECTIONS."""
    return anthropic.DefaultAsyncHttpxClient(limits=httpx2.Limits(
        max_connections=settings.tg_llm_connections, max_keepalive_connections=100))


def make(settings: Settings) -> "AnthropicProvider":
    client = anthropic.AsyncAnthropic(api_key=settings.anthropic_api_key or None,
                                      base_url=settings.anthropic_base_url or None,
                                      max_retries=0, http_client=pool(settings))
    return AnthropicProvider(client, settings.tg_llm_model or DEFAULT_MODEL,
                             settings.tg_llm_max_tokens)


class AnthropicProvider:
    """Any client with the Messages API: ``AsyncAnthropic`` or ``AsyncAnthropicVertex``."""

    def __init__(self, client: anthropic.AsyncAnthropic | anthropic.AsyncAnthropicVertex,
                 model: str, max_tokens: int) -> None:
        self.client = client
        self.model = model  # the settings a request's ``Options`` may replace
        self.max_tokens = max_tokens

    async def stream(self, system: str, prompt: str, options: Options
                     ) -> AsyncGenerator[str | Usage, None]:
        # No temperature: API version 2026-10-21 (SDK 2.x) rejects sampling parameters.
        model = chosen(options.model, self.model)
        request: dict[str, Any] = {
            "model": model, "max_tokens": chosen(options.max_tokens, self.max_tokens),
            "stream": True, "messages": [{"role": "user", "content": prompt}]}
        if system:  # the API rejects an empty system text
            request["system"] = system
        if options.stop:
            request["stop_sequences"] = options.stop
        delta_field = "text"  # where a content_block_delta carries the answer
        if options.schema is not None:
            request["tools"] = [{"name": ANSWER_TOOL, "description": ANSWER_TOOL_DESCRIPTION,
                                 "input_schema": options.schema}]
            request["tool_choice"] = {"type": "tool", "name": ANSWER_TOOL}
            delta_field = "partial_json"
        usage: dict = {}
        finished = False
        try:
            async with self.client.messages.with_streaming_response.create(
                    **request) as response:
                async for line in response.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    event = json.loads(line[5:])
                    kind = event.get("type")
                    if kind == "content_block_delta":
                        text = event["delta"].get(delta_field)  # absent in other kinds
                        if text:
                            yield text
                    elif kind == "message_start":
                        usage = event["message"].get("usage") or usage
                        model = event["message"].get("model") or model
                    elif kind == "message_delta":
                        # Counts here are cumulative; a null one leaves the start's.
                        usage.update((k, v) for k, v in (event.get("usage") or {}).items()
                                     if v is not None)
                    elif kind == "message_stop":
                        finished = True
                        break
                    elif kind == "error":
                        raise _stream_error(event.get("error") or {})
        except anthropic.APIStatusError as error:
            overloaded = (error.status_code in OVERLOAD_STATUSES
                          or _error_type(error.body) in OVERLOAD_TYPES)
            raise (Overloaded if overloaded else LlmError)(
                f"Claude at {self.client.base_url} answered {error.status_code}: "
                f"{_error_text(error.body) or error.message}") from None
        except anthropic.APIConnectionError as error:
            raise LlmError(f"cannot reach Claude at {self.client.base_url}: {error}") from None
        except LlmError:
            raise
        except Exception as error:  # the HTTP stream broke mid-way, or sent bad JSON
            raise LlmError(f"Claude stream failed: {type(error).__name__}: {error}") from None
        if not finished:
            raise LlmError(f"Claude at {self.client.base_url} ended the stream early")
        yield Usage(_input_tokens(usage), usage.get("output_tokens"), model)


def _input_tokens(usage: dict) -> int | None:
    """All prompt tokens: with prompt caching, ``input_tokens`` counts only the
    uncached part."""
    if usage.get("input_tokens") is None:
        return None
    return (usage["input_tokens"] + (usage.get("cache_creation_input_tokens") or 0)
            + (usage.get("cache_read_input_tokens") or 0))


def _stream_error(error: dict) -> LlmError:
    kind = Overloaded if error.get("type") in OVERLOAD_TYPES else LlmError
    return kind(f"Claude stream error {error.get('type')}: {error.get('message')}")


def _error_inner(body: object) -> dict:
    """The ``error`` object of Anthropic's body, or of Google's (Vertex AI)."""
    if isinstance(body, list) and body:  # Google APIs sometimes wrap it in a list
        body = body[0]
    inner = body.get("error", body) if isinstance(body, dict) else None
    return inner if isinstance(inner, dict) else {}


def _error_type(body: object) -> str | None:
    return _error_inner(body).get("type")


def _error_text(body: object) -> str:
    inner = _error_inner(body)
    return str(inner.get("message") or inner or body or "")
