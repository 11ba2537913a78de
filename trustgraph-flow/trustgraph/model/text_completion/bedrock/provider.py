"""AWS Bedrock through the Converse API (``converse_stream``), on aiobotocore so the
answer is read without blocking the event loop.

Bedrock streams AWS event-stream binary frames; botocore decodes them (checking both
CRCs) and hands each over as one parsed event: ``contentBlockDelta`` carries text,
``metadata`` the token counts, and an exception frame raises ``EventStreamError``.
Credentials, region and endpoint resolve as every AWS tool does, unless set here.
A JSON Schema is asked for as a forced tool (``toolConfig``: one tool whose
``inputSchema`` is the schema, and ``toolChoice`` naming it); its input streams as
``toolUse`` deltas of JSON text.
"""
import asyncio
from collections.abc import AsyncGenerator
from contextlib import AsyncExitStack

from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.exceptions import ClientError, NoCredentialsError, NoRegionError

from ..provider import LlmError, LlmSettings, Options, Overloaded, Usage, chosen

DEFAULT_MODEL = "anthropic.claude-3-5-sonnet-20240620-v1:0"
# "Slow down" error codes: PascalCase in HTTP answers, camelCase inside a stream.
OVERLOAD_CODES = {"throttlingexception", "serviceunavailableexception",
                  "modelnotreadyexception", "toomanyrequestsexception"}
ANSWER_TOOL = "answer"  # the forced tool whose input is an answer under a schema


class Settings(LlmSettings):
    aws_region: str = ""  # else AWS_DEFAULT_REGION or the AWS config file
    aws_access_key_id: str = ""  # the three keys: else the AWS credential chain
    aws_secret_access_key: str = ""
    aws_session_token: str = ""
    bedrock_endpoint_url: str = ""  # e.g. a VPC endpoint; default from the region


def make(settings: Settings) -> "BedrockProvider":
    return BedrockProvider(settings)


class BedrockProvider:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.model = settings.tg_llm_model or DEFAULT_MODEL
        self._client = None
        self._lock = asyncio.Lock()
        self._exit = AsyncExitStack()

    async def client(self):
        """One client for the provider's life (its connection pool is reused); made on
        first use since aiobotocore clients are entered inside the running loop."""
        async with self._lock:
            if self._client is None:
                s = self.settings
                config = AioConfig(
                    retries={"total_max_attempts": 1},  # retry.py owns retries
                    read_timeout=s.tg_request_timeout, max_pool_connections=s.tg_llm_connections)
                self._client = await self._exit.enter_async_context(get_session().create_client(
                    "bedrock-runtime", region_name=s.aws_region or None,
                    endpoint_url=s.bedrock_endpoint_url or None,
                    aws_access_key_id=s.aws_access_key_id or None,
                    aws_secret_access_key=s.aws_secret_access_key or None,
                    aws_session_token=s.aws_session_token or None, config=config))
        return self._client

    async def aclose(self) -> None:
        await self._exit.aclose()
        self._client = None

    async def stream(self, system: str, prompt: str, options: Options
                     ) -> AsyncGenerator[str | Usage, None]:
        model = chosen(options.model, self.model)
        settings = self.settings
        inference: dict[str, object] = {
            "maxTokens": chosen(options.max_tokens, settings.tg_llm_max_tokens),
            "temperature": chosen(options.temperature, settings.tg_llm_temperature)}
        if options.stop:
            inference["stopSequences"] = options.stop
        request = {"modelId": model, "inferenceConfig": inference,
                   "messages": [{"role": "user", "content": [{"text": prompt}]}]}
        if system:
            request["system"] = [{"text": system}]
        if options.schema is not None:
            request["toolConfig"] = {"tools": [{"toolSpec": {
                "name": ANSWER_TOOL, "description": "Gives the answer, in the shape asked for.",
                "inputSchema": {"json": options.schema}}}],
                "toolChoice": {"tool": {"name": ANSWER_TOOL}}}
        usage: dict[str, int] = {}  # the stream's token counts, from its metadata event
        events = None
        try:
            response = await (await self.client()).converse_stream(**request)
            events = response["stream"]
            async for event in events:
                if "contentBlockDelta" in event:
                    text = _answer_text(event["contentBlockDelta"]["delta"], options)
                    if text:
                        yield text
                elif "metadata" in event:
                    usage = event["metadata"].get("usage") or usage
        except ClientError as error:  # an HTTP error answer, or an exception frame
            raise _error(error) from None
        except (NoRegionError, NoCredentialsError) as error:
            raise LlmError(f"Bedrock is not configured: {str(error).rstrip('.')}. Set AWS_REGION "
                           "and AWS credentials (keys, AWS_PROFILE or a role).") from None
        except Exception as error:  # a connection refused or cut mid-stream, ...
            raise LlmError(f"Bedrock stream failed: {type(error).__name__}: {error}") from None
        finally:
            if events is not None:
                # A no-op after the last frame; when the caller stops early (aclose,
                # cancel) it drops the HTTP connection so Bedrock stops generating.
                events.close()
        yield Usage(usage.get("inputTokens"), usage.get("outputTokens"), model)


def _answer_text(delta: dict, options: Options) -> str | None:
    """A delta's part of the answer: text, or under a schema the forced tool's input."""
    if options.schema is None:
        return delta.get("text")
    return (delta.get("toolUse") or {}).get("input")


def _error(error: ClientError) -> LlmError:
    code = error.response.get("Error", {}).get("Code", "")
    message = error.response.get("Error", {}).get("Message", "") or str(error)
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    overloaded = code.lower() in OVERLOAD_CODES or status in (429, 503)
    return (Overloaded if overloaded else LlmError)(f"Bedrock answered {code}: {message}")
