"""Cohere chat v2 (``AsyncClientV2.chat_stream``'s endpoint).

The SDK supplies configuration, auth and HTTP errors (overload retries are
retry.py's). The token stream is read as raw SSE lines, one ``json.loads`` per
event, through ``with_raw_response``: the SDK's own reader builds a typed model per
event and logs, then skips, any event it cannot parse (DESIGN §1). Each ``data:``
line carries its own ``type``, so ``event:`` lines are skipped. Cohere's stream
names no model, so usage reports the one asked for. A JSON Schema goes as
``response_format`` ``{"type": "json_object", "json_schema": <schema>}``.
"""
import json
from collections.abc import AsyncGenerator
from typing import Any

import cohere
import httpx
from cohere.core.api_error import ApiError

from ..provider import LlmError, LlmSettings, Options, Overloaded, Usage, chosen

DEFAULT_MODEL = "command-a-03-2025"
OVERLOAD_STATUSES = (429, 503)


class Settings(LlmSettings):
    cohere_api_key: str = ""  # empty: CO_API_KEY
    cohere_base_url: str = ""  # empty: https://api.cohere.com


def make(settings: Settings) -> "CohereProvider":
    try:
        # Its own pool: the SDK's default httpx client holds 100 connections at most.
        pool = httpx.AsyncClient(limits=httpx.Limits(max_connections=settings.tg_llm_connections))
        client = cohere.AsyncClientV2(api_key=settings.cohere_api_key or None,
                                      base_url=settings.cohere_base_url or None, max_retries=0,
                                      httpx_client=pool)
    except ApiError:  # no key
        raise SystemExit("TG_LLM=cohere needs COHERE_API_KEY (or CO_API_KEY)") from None
    return CohereProvider(client, settings.tg_llm_model or DEFAULT_MODEL,
                          settings.tg_llm_temperature, settings.tg_llm_max_tokens)


class CohereProvider:
    def __init__(self, client: cohere.AsyncClientV2, model: str, temperature: float,
                 max_tokens: int) -> None:
        self.client = client
        self.model = model  # the settings a request's ``Options`` may replace
        self.temperature = temperature
        self.max_tokens = max_tokens

    async def stream(self, system: str, prompt: str, options: Options
                     ) -> AsyncGenerator[str | Usage, None]:
        messages: list[cohere.ChatMessageV2] = [cohere.UserChatMessageV2(content=prompt)]
        if system:
            messages.insert(0, cohere.SystemChatMessageV2(content=system))
        model = chosen(options.model, self.model)
        # Only when asked: the SDK would send an explicit None as null.
        shaped: dict[str, Any] = {} if options.schema is None else {
            "response_format": cohere.JsonObjectResponseFormatV2(json_schema=options.schema)}
        end = None
        try:
            async with self.client.with_raw_response.chat_stream(
                    model=model, messages=messages,
                    temperature=chosen(options.temperature, self.temperature),
                    max_tokens=chosen(options.max_tokens, self.max_tokens),
                    stop_sequences=options.stop or None, **shaped) as raw:
                async for line in raw.response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    event = json.loads(line[5:])
                    kind = event.get("type")
                    if kind == "content-delta":
                        text = event["delta"]["message"]["content"].get("text")
                        if text:  # absent in thinking deltas
                            yield text
                    elif kind == "message-end":
                        end = event.get("delta") or {}
                        break
        except ApiError as error:
            overloaded = error.status_code in OVERLOAD_STATUSES
            raise (Overloaded if overloaded else LlmError)(
                f"Cohere answered {error.status_code}: {_error_text(error.body)}") from None
        except Exception as error:  # no connection, the stream broke, or bad JSON
            raise LlmError(f"Cohere stream failed: {type(error).__name__}: {error}") from None
        if end is None:
            raise LlmError("Cohere ended the stream before the answer was complete")
        if end.get("error") or end.get("finish_reason") == "ERROR":
            raise LlmError(f"Cohere failed mid-answer: {end.get('error') or 'unknown error'}")
        yield _usage(end.get("usage") or {}, model)

    async def aclose(self) -> None:
        await self.client.__aexit__(None, None, None)  # closes the SDK's HTTP client


def _usage(usage: dict, model: str) -> Usage:
    """What Cohere bills; ``tokens`` also counts the preamble it adds to the prompt."""
    counts = usage.get("billed_units") or usage.get("tokens") or {}
    return Usage(_int(counts.get("input_tokens")), _int(counts.get("output_tokens")), model)


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)  # Cohere's API types counts as numbers


def _error_text(body: object) -> str:
    if isinstance(body, dict):
        return str(body.get("message") or body)
    return str(body or "")
