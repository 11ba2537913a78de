"""The OpenAI-compatible API (PROTOCOL §3b, docs/openai.md): ``GET /v1/models``,
``GET /v1/models/{model}`` and ``POST /v1/chat/completions``, also under
``/api/v1/openai/`` (a base URL of ``…/v1`` or ``…/api/v1/openai``).

A model is one of the answering services: ``document-rag``, ``graph-rag``,
``lazy-rag``, ``agent``, or ``llm`` (the configured provider straight through),
optionally naming a collection (``document-rag:papers``; or the request's own
``collection`` field) and a flow (``llm@strong``, ``document-rag:papers@strong``; or
the request's ``flow`` field, or the ``X-TG-Flow`` header; else the default flow).
The tenant comes from the caller's key (the core's client fills ``user``), never
from the body (OpenAI's ``user`` field is ignored).

The messages become the service's question: the user's last message, with the
earlier turns of the conversation made part of it. For ``llm`` the conversation is
the prompt and the system messages its system text; for the others the last
question is rewritten to stand alone (the ``agent-reformulate`` prompt, one LLM call
before retrieval, only when there are earlier turns), so that retrieval finds what
a follow-up question refers to even as the client edits or branches the
conversation. The agent may keep a session instead: a request's ``session_id``
continues the agent's own memory of it (the first chunk names the session).
``max_tokens`` (or ``max_completion_tokens``), ``temperature`` and ``stop`` go to
the LLM call that writes the answer (not for ``agent``: its LLM calls are its
reasoning steps). Errors are OpenAI's shape, ``{"error": {"message", "type",
"param", "code"}}`` with the HTTP status; ``code`` is the gateway's or service's
error type (``model_not_found`` for an unknown model).
"""
import asyncio
import time
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from trustgraph.schema import LIBRARIAN_FLOW, Usage
from trustgraph.schema.text_completion import MAX_STOP_SEQUENCES

from ..core import (
    REQUESTS,
    Caller,
    Core,
    Document,
    GatewayError,
    Refs,
    StreamFormat,
    bad_request,
    failed,
    json_body,
    named_flow,
    new_request_id,
    streamed,
    validation_message,
)
from .asking import answer, ask, collected, read, rendered
from .openai_answers import Completion, Events, dumps

PREFIXES = ("/v1", "/api/v1/openai")
OWNER = "trustgraph"
STARTED = int(time.time())  # the models' ``created``
REFORMULATE = "agent-reformulate"  # the prompt that makes a follow-up stand alone
HISTORY_TURNS = 10  # earlier turns a rewrite is shown (as the agent's memory)
COLLECTIONS_WAIT = 2.0  # seconds /v1/models waits for the library's collections
# Events are whole SSE events already ("data: ...\n\n"): written as they are.
EVENTS = StreamFormat("text/event-stream", b"", b"")


@dataclass(frozen=True)
class Model:
    name: str
    service: str
    question: str  # the field of the service's request that holds the question
    collection: bool = True  # reads a collection
    sampling: bool = True  # passes max_tokens, temperature, stop to its answer's LLM call


MODELS = {model.name: model for model in (
    Model("document-rag", "document-rag", "query"),
    Model("graph-rag", "graph-rag", "query"),
    Model("lazy-rag", "lazy-rag", "query"),
    Model("agent", "agent", "question", sampling=False),
    Model("llm", "text-completion", "prompt", collection=False),
)}


# --- the request -----------------------------------------------------------------

class ContentPart(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None

    def text(self, where: str) -> str:
        if self.content is None or isinstance(self.content, str):
            return self.content or ""
        for part in self.content:
            if part.type != "text":
                raise bad_request(f"{where}.content: only text parts are supported, "
                                  f"not {part.type!r}")
        return "".join(part.text or "" for part in self.content)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")
    include_usage: bool = False


class ChatRequest(BaseModel):
    """OpenAI's request (the fields that mean nothing here, such as ``tools``,
    ``top_p`` or ``user``, are ignored), and this gateway's own fields: ``collection``,
    ``flow``, ``citations`` and, for the agent, ``session_id``."""

    model_config = ConfigDict(extra="ignore")
    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    stop: str | list[str] | None = None
    n: int = Field(1, ge=1, le=1)  # one choice only
    collection: str | None = Field(None, min_length=1)
    flow: str | None = None  # else the model's @flow, X-TG-Flow, or the default flow
    citations: bool = False  # numbered sources appended to the answer's text
    session_id: str | None = Field(None, min_length=1, max_length=200)

    @field_validator("stop")
    @classmethod
    def _stop_list(cls, stop: str | list[str] | None) -> list[str] | None:
        stops = [stop] if isinstance(stop, str) else stop
        if stops is not None and len(stops) > MAX_STOP_SEQUENCES:
            raise ValueError(f"at most {MAX_STOP_SEQUENCES} stop sequences")
        return stops or None

    def sampling(self) -> dict[str, Any]:
        options = {"max_tokens": self.max_tokens or self.max_completion_tokens,
                   "temperature": self.temperature, "stop": self.stop}
        return {name: value for name, value in options.items() if value is not None}


@dataclass(frozen=True)
class Conversation:
    system: str
    turns: list[dict[str, str]]  # earlier turns, oldest first: {"question", "answer"}
    question: str  # the user's last message


def conversation(messages: list[ChatMessage]) -> Conversation:
    """The system text, the earlier turns and the question; a 400 when the user's
    message is not last."""
    system: list[str] = []
    turns: list[dict[str, str]] = []
    asked: list[str] = []
    answered: list[str] = []
    for i, message in enumerate(messages):
        text = message.text(f"messages[{i}]")
        if message.role in ("system", "developer"):
            system.append(text)
        elif message.role == "assistant":
            answered.append(text)
        elif message.role == "user":
            if answered:
                turns.append({"question": "\n\n".join(asked), "answer": "\n\n".join(answered)})
                asked, answered = [], []
            asked.append(text)
        else:
            raise bad_request(f"messages[{i}].role: {message.role!r} messages are not "
                              "supported (these models call no tools of the client's)")
    question = "\n\n".join(asked)
    if answered or not question.strip():
        raise bad_request("messages: the last message must be the user's, with text")
    return Conversation("\n\n".join(system), turns, question)


def transcript(talk: Conversation) -> str:
    """``llm``'s prompt: the question, after the conversation so far when there is one."""
    if not talk.turns:
        return talk.question
    earlier = "\n".join(f"User: {turn['question']}\nAssistant: {turn['answer']}"
                        for turn in talk.turns)
    return f"The conversation so far:\n{earlier}\n\nReply to the user's latest message:\n" \
           f"{talk.question}"


def flow_of(name: str, chat: "ChatRequest", request: web.Request, default: str
            ) -> tuple[str, str]:
    """The model's name without its ``@flow`` suffix, and the flow asked on: the
    suffix, the ``flow`` field or the ``X-TG-Flow`` header, else ``default``."""
    base, at, suffix = name.rpartition("@")
    if not at:
        base, suffix = name, ""
    if suffix and chat.flow and suffix != chat.flow:
        raise bad_request(f"flow: {chat.flow!r} differs from the model's {suffix!r}")
    return base, suffix or chat.flow or named_flow(request) or default


def model_of(name: str, collection: str | None) -> tuple[Model, str | None]:
    """The model a name means, and the collection (the name's suffix or the field)."""
    base, _, suffix = name.partition(":")
    model = MODELS.get(base)
    if model is None:
        raise GatewayError("model_not_found", f"the model {name!r} does not exist; models: "
                           f"{', '.join(MODELS)}, optionally as <model>:<collection>", 404)
    if suffix and collection and suffix != collection:
        raise bad_request(f"collection: {collection!r} differs from the model's {suffix!r}")
    collection = suffix or collection
    if collection and not model.collection:
        raise bad_request(f"model: {base!r} reads no collection")
    return model, collection


# --- errors in OpenAI's shape --------------------------------------------------------

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
               403: "permission_error", 404: "invalid_request_error",
               409: "invalid_request_error", 413: "invalid_request_error",
               429: "rate_limit_error"}


def openai_error(exception: BaseException) -> tuple[int, bytes]:
    error = failed(exception)
    kind = ERROR_TYPES.get(error.status, "server_error" if error.status >= 500
                           else "invalid_request_error")
    return error.status, dumps({"error": {"message": error.message, "type": kind,
                                          "param": None, "code": error.type}})


def error_response(exception: BaseException) -> web.Response:
    status, body = openai_error(exception)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return web.Response(body=body, status=status, content_type="application/json",
                        headers=headers)


def error_event(exception: BaseException) -> bytes:
    """A failure after the first chunk: the stream's last event."""
    return b"data: " + openai_error(exception)[1] + b"\n\n"


# --- the routes ----------------------------------------------------------------------

def install(core: Core) -> None:
    api = OpenAiApi(core)
    for prefix in PREFIXES:
        core.route("GET", f"{prefix}/models", api.models, errors=error_response)
        core.route("GET", f"{prefix}/models/{{model}}", api.model, errors=error_response)
        core.route("POST", f"{prefix}/chat/completions", api.complete, errors=error_response)
    core.document(DOCUMENT)


class OpenAiApi:
    def __init__(self, core: Core) -> None:
        self.core = core

    async def complete(self, request: web.Request, caller: Caller) -> web.StreamResponse:
        chat = _valid(await json_body(request))
        name, flow = flow_of(chat.model, chat, request, self.core.client.flows.default)
        model, collection = model_of(name, chat.collection)
        talk = conversation(chat.messages)
        asked, spent, rewritten = await self._request(caller, chat, flow, model, collection,
                                                      talk)
        request_id = new_request_id()
        # Only the text is shown: an answer whose text failed is a failure.
        frames, reader = ask(self.core.client, caller, model.service, flow, asked,
                             request_id, text_only=True)
        REQUESTS.labels(model.service, "openai").inc()
        events = Events(f"chatcmpl-{request_id}", chat.model, bool(
            chat.stream and chat.stream_options and chat.stream_options.include_usage))
        completion = Completion(
            events, reader.model, spent, citations=chat.citations,
            extra={"standalone_question": rewritten} if rewritten is not None else None,
            streaming=chat.stream)
        async with aclosing(rendered(frames, reader, completion.render)) as batches:
            if chat.stream:
                return await streamed(request, batches, EVENTS, error_event)
            async for _ in batches:
                pass
        return web.Response(body=dumps(completion.collected()), content_type="application/json")

    async def _request(self, caller: Caller, chat: ChatRequest, flow: str, model: Model,
                       collection: str | None, talk: Conversation
                       ) -> tuple[dict[str, Any], Usage, str | None]:
        """The service's request, the tokens spent making it and the question it
        asks when that is a rewrite of the user's (None: the user's own)."""
        sampling = chat.sampling() if model.sampling else {}
        if model.name == "llm":
            return {"system": talk.system, "prompt": transcript(talk), "streaming": True,
                    **sampling}, Usage(), None
        request: dict[str, Any] = {"streaming": True, **sampling}
        if collection:
            request["collection"] = collection
        if model.name == "agent" and chat.session_id:
            request["session_id"] = chat.session_id  # the agent remembers the turns
        elif talk.turns:
            question, spent = await self._standalone(caller, flow, talk)
            return {**request, model.question: question}, spent, question
        return {**request, model.question: talk.question}, Usage(), None

    async def _standalone(self, caller: Caller, flow: str, talk: Conversation
                          ) -> tuple[str, Usage]:
        frames, reader = ask(self.core.client, caller, "prompt", flow, {
            "id": REFORMULATE, "variables": {
                "question": talk.question, "history": talk.turns[-HISTORY_TURNS:]}})
        rewrite = await collected(read(frames, reader))
        return rewrite.text.strip() or talk.question, rewrite.usage

    async def models(self, request: web.Request, caller: Caller) -> web.Response:
        names = [name for name in MODELS if self._served(MODELS[name])]
        collections = await self._collections(caller)
        listed = [*names, *(f"{name}:{collection}" for collection in collections
                            for name in names if MODELS[name].collection)]
        return web.Response(body=dumps({"object": "list", "data": [
            _entry(name) for name in listed]}), content_type="application/json")

    async def model(self, request: web.Request, caller: Caller) -> web.Response:
        name = request.match_info["model"]
        model, _ = model_of(name.rpartition("@")[0] or name, None)
        if not self._served(model):
            raise GatewayError("model_not_found", f"the model {name!r} is turned off on "
                               "this gateway", 404)
        return web.Response(body=dumps(_entry(name)), content_type="application/json")

    def _served(self, model: Model) -> bool:
        """Not turned off on this gateway (LazyRAG's setting)."""
        try:
            self.core.client.resolve(model.service, self.core.client.flows.default)
        except GatewayError:
            return False
        return True

    async def _collections(self, caller: Caller) -> list[str]:
        """The caller's collections in the library; none when it does not answer soon
        (a stack without a librarian still lists its models)."""
        try:
            async with asyncio.timeout(COLLECTIONS_WAIT):
                final = await answer(self.core.client, caller, "librarian", LIBRARIAN_FLOW,
                                     {"operation": "list-collections"})
        except Exception:
            return []
        return [item["collection"] for item in final.get("collections") or ()]


def _entry(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": STARTED, "owned_by": OWNER}


def _valid(body: dict[str, Any]) -> ChatRequest:
    try:
        return ChatRequest.model_validate(body)
    except ValidationError as error:
        raise bad_request(validation_message(error, where="")) from None



# --- the OpenAPI document ------------------------------------------------------------

def _paths(refs: Refs) -> dict[str, Any]:
    error = {"content": {"application/json": {"schema": {"type": "object", "properties": {
        "error": {"type": "object", "properties": {name: {"type": ["string", "null"]} for
                                                   name in ("message", "type", "param",
                                                            "code")}}}}}}}
    errors = {str(status): {"description": what, **error} for status, what in (
        (400, "bad request: the message names the field"), (401, "missing or wrong key"),
        (404, "unknown model (code model_not_found) or flow"),
        (502, "the service failed (code: its error type)"),
        (504, "the service sent nothing for too long"))}
    complete = {"post": {
        "summary": "OpenAI's chat completions over the answering services",
        "description": "Models: " + ", ".join(MODELS) + ", optionally <model>:<collection>, "
                       "and @<flow> (or the flow field, or the X-TG-Flow header). "
                       "With stream: true, OpenAI's SSE (chat.completion.chunk, then data: "
                       "[DONE]); the first chunk carries the sources. docs/openai.md.",
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": refs[(ChatRequest, "validation")]}}},
        "responses": {"200": {"description": "a chat.completion, or its chunks as SSE",
                              "content": {"application/json": {}, "text/event-stream": {}}},
                      **errors}}}
    models = {"get": {"summary": "the models (services), with the caller's collections",
                      "responses": {"200": {"description": "OpenAI's model list"}}}}
    model = {"get": {"summary": "one model", "responses": {
        "200": {"description": "OpenAI's model object"}, "404": errors["404"]}}}
    return {path: operation for prefix in PREFIXES for path, operation in (
        (f"{prefix}/chat/completions", complete), (f"{prefix}/models", models),
        (f"{prefix}/models/{{model}}", model))}


DOCUMENT = Document(((ChatRequest, "validation"),), _paths)
