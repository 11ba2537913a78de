"""OpenAI chat completions, and every server that speaks that API (vLLM, LM Studio,
llamafile, TGI, Ollama's /v1), chosen by ``OPENAI_BASE_URL``.

The SDK client holds the configuration and credentials (base URL, auth headers,
Azure's api-version query); the request goes out through aiohttp and its stream is
read as raw SSE lines. The SDK's own request pipeline cost ~1.5-2.5 ms of CPU per
request here (first token 2.4-3.4 ms against 0.8-1.1 ms raw), most of what the
whole platform added to a first token, and parsing every chunk into its typed
models costs more again under load (DESIGN §1). Retries are retry.py's.
"""
import json
from collections.abc import AsyncGenerator
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass

import aiohttp
import openai
from pydantic_core import from_json

from ..provider import (
    DEFAULT_CONNECTIONS,
    LlmError,
    LlmSettings,
    Options,
    Overloaded,
    Usage,
    chosen,
)
from .formats import SchemaFormat, openai_strict

DEFAULT_MODEL = "gpt-4o-mini"


class Settings(LlmSettings):
    openai_api_key: str = ""
    openai_base_url: str = ""


def make(settings: Settings) -> "OpenAiProvider":
    return compatible(settings, settings.openai_base_url, settings.openai_api_key)


def compatible(settings: LlmSettings, base_url: str, api_key: str = "",
               default_model: str = DEFAULT_MODEL,
               schema_format: SchemaFormat = openai_strict) -> "OpenAiProvider":
    """The adapter for any server speaking the OpenAI chat API at ``base_url``
    (empty: OpenAI itself); the presets (vllm, lmstudio, ...) are this with a URL
    and the way their server takes a schema (``formats.py``)."""
    # Local OpenAI-compatible servers need no key, but the SDK insists on one.
    client = openai.AsyncOpenAI(api_key=api_key or "not-needed", base_url=base_url or None,
                                max_retries=0)
    return OpenAiProvider(Endpoint.of(client), settings.tg_llm_model or default_model,
                          settings.tg_llm_temperature, settings.tg_llm_max_tokens,
                          connections=settings.tg_llm_connections,
                          schema_format=schema_format)


@dataclass(frozen=True)
class Endpoint:
    """Where a chat completions request goes, and what it carries besides its body."""
    url: str
    query: dict[str, str]
    headers: dict[str, str]
    label: str  # how errors name the server

    @classmethod
    def of(cls, client: openai.AsyncOpenAI, label: str = "") -> "Endpoint":
        """The endpoint ``client`` (``AsyncOpenAI`` or ``AsyncAzureOpenAI``) is set up
        for: its base URL, Azure's api-version query, its auth headers."""
        headers = {**client.default_headers, **client.auth_headers}
        return cls(url=f"{client.base_url}chat/completions",
                   query={k: v for k, v in client.default_query.items() if isinstance(v, str)},
                   headers={k: v for k, v in headers.items() if isinstance(v, str)},
                   label=label or str(client.base_url))


class OpenAiProvider:
    """Any server with the OpenAI chat API, at ``endpoint``; ``model``, ``temperature``
    and ``max_tokens`` are the settings a request's ``Options`` may replace;
    ``schema_format`` is how the server takes a request's JSON Schema."""

    def __init__(self, endpoint: Endpoint, model: str, temperature: float,
                 max_tokens: int, include_usage: bool = True,
                 connections: int = DEFAULT_CONNECTIONS,
                 schema_format: SchemaFormat = openai_strict) -> None:
        self.endpoint = endpoint
        self.schema_format = schema_format
        self.connections = connections  # the HTTP pool's size (TG_LLM_CONNECTIONS)
        self._session: aiohttp.ClientSession | None = None  # made inside the running loop
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        # Servers that report usage unasked and reject ``stream_options`` (Mistral)
        # are given none.
        self.stream_options = {"include_usage": True} if include_usage else None

    async def stream(self, system: str, prompt: str, options: Options
                     ) -> AsyncGenerator[str | Usage, None]:
        messages = [{"role": "user", "content": prompt}]
        if system:
            messages.insert(0, {"role": "system", "content": system})
        model = self._model(options)
        body = {"model": model, "messages": messages, "stream": True,
                "temperature": chosen(options.temperature, self.temperature),
                "max_tokens": self._max_tokens(options)}
        if options.stop:
            body["stop"] = options.stop
        if options.schema is not None:
            body.update(self.schema_format(options.schema))
        if self.stream_options:
            body["stream_options"] = self.stream_options
        async with self._turn(model) as endpoint:
            answer, opened = _Answer(endpoint.label, model), False
            try:
                async with self._http().post(endpoint.url, params=endpoint.query, json=body,
                                             headers=endpoint.headers) as response:
                    if response.status >= 400:
                        raise await _refusal(response, endpoint.label)
                    opened = True
                    async for lines in waiting_lines(response.content):
                        text, failure = answer.read(lines)
                        if text:  # what came before a failure is still the answer's start
                            yield text
                        if failure is not None:
                            raise failure
                        if answer.finished:
                            break
            except LlmError:
                raise
            except aiohttp.ClientConnectionError as error:
                if not opened:
                    raise LlmError(f"cannot reach {endpoint.label}: {error}") from None
                raise LlmError(f"LLM stream failed: {type(error).__name__}: {error}") from None
            except Exception as error:  # the HTTP stream broke mid-way, or sent bad JSON
                raise LlmError(f"LLM stream failed: {type(error).__name__}: {error}") from None
            if not answer.finished:  # a server that stops without [DONE] cut the answer short
                raise LlmError(f"the stream from {endpoint.label} ended without [DONE]")
            yield Usage(answer.usage.get("prompt_tokens"),
                        answer.usage.get("completion_tokens"), answer.model)

    def _model(self, options: Options) -> str:
        """The model a request is answered by: the one it names, else the setting."""
        return chosen(options.model, self.model)

    def _max_tokens(self, options: Options) -> int:
        """The most tokens a request's answer may take: its own, else the setting."""
        return chosen(options.max_tokens, self.max_tokens)

    def _turn(self, model: str) -> AbstractAsyncContextManager[Endpoint]:
        """The endpoint a request for ``model`` goes to, held for as long as the
        request lasts (the local provider makes a request wait here for a free
        sequence; Azure routes by the model, its deployment, in the URL)."""
        return nullcontext(self.endpoint)

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.connections, limit_per_host=0),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=600))
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


async def _refusal(response: aiohttp.ClientResponse, label: str) -> LlmError:
    text = await response.text()
    try:
        message = _error_text(json.loads(text))
    except ValueError:
        message = text.strip()[:300]
    kind = Overloaded if response.status in (429, 503, 529) else LlmError
    return kind(f"{label} answered {response.status}: {message or response.reason}")


async def waiting_lines(body: aiohttp.StreamReader) -> AsyncGenerator[list[bytes], None]:
    """Every complete line of ``body`` (without its ``\\n``), grouped by what one read
    found waiting; a last line with no newline comes at the end of the body.

    When this process falls behind the stream (many streams on two cores), several
    events are waiting in the socket's buffer: read together, they are one delta, so
    one record, one broker message and one websocket frame downstream instead of one
    each. Nothing waits for more than is there, so no token is held back."""
    rest = b""
    while data := await body.readany():
        lines = (rest + data).split(b"\n") if rest else data.split(b"\n")
        rest = lines.pop()
        if lines:
            yield lines
    if rest:
        yield [rest]


class _Answer:
    """The SSE events of one answer as they are read: their text, and what the
    stream says besides (usage, model, whether it finished with ``[DONE]``)."""

    __slots__ = ("label", "usage", "model", "finished")

    def __init__(self, label: str, model: str) -> None:
        self.label = label
        self.usage: dict = {}
        self.model = model
        self.finished = False

    def read(self, lines: list[bytes]) -> tuple[str, LlmError | None]:
        """The text of ``lines`` joined, and the failure that ended them, if any."""
        text: list[str] = []
        for line in lines:
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                self.finished = True
                break
            try:
                chunk = from_json(data)  # a third of json.loads's CPU, per SSE event
            except ValueError as error:
                return "".join(text), LlmError(
                    f"LLM stream failed: an event is not JSON ({error}): {data[:80]!r}")
            if chunk.get("error") or chunk.get("object") == "error":
                return "".join(text), LlmError(f"{self.label} failed mid-answer: "
                                               f"{_error_text(chunk.get('error') or chunk)}")
            _content(chunk, text)
            self.usage = chunk.get("usage") or self.usage
            self.model = chunk.get("model") or self.model
        return "".join(text), None


def _content(chunk: dict, text: list[str]) -> None:
    """Appends the answer text in ``chunk``'s choices to ``text``."""
    for choice in chunk.get("choices") or ():
        content = (choice.get("delta") or {}).get("content")
        if content and not isinstance(content, str):
            content = _text_parts(content)
        if content:
            text.append(content)


def _text_parts(content: list) -> str:
    """Content sent as typed parts (reasoning models): only ``text`` parts are answer."""
    return "".join(part.get("text", "") for part in content
                   if isinstance(part, dict) and part.get("type") == "text")


def _error_text(error: object) -> str:
    if isinstance(error, dict):
        inner = error.get("error", error)
        if isinstance(inner, dict):
            return str(inner.get("message") or inner)
        return str(inner)
    return str(error or "")
