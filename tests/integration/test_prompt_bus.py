"""The prompt service over a real pulsar-lite broker, with templates in the real
config service.

Two LLMs answer: on flow ``default`` the real openai provider against the local
OpenAI-format server (text streaming, token counts, errors, cancel); on flow
``scripted`` a tiny text-completion service written here that echoes the rendered
prompt back, so a test chooses the model's answer (JSON, fenced or broken) through the
template's variables.
"""
import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from functools import partial

import pytest

from tests.support.openai_server import expected_text
from tests.support.waiting import answered, eventually
from trustgraph.base import (
    ConfigClient,
    Context,
    Delta,
    Processor,
    ProcessorSettings,
    ProcessorSpec,
    PromptClient,
    Requester,
    Service,
    ServiceError,
    Timing,
)
from trustgraph.config.service import SPEC as CONFIG_SPEC
from trustgraph.config.service import ConfigSettings
from trustgraph.model.text_completion.openai.provider import Settings as OpenAiSettings
from trustgraph.model.text_completion.service import spec_for
from trustgraph.prompt.defaults import DEFAULT_TEMPLATES, default_config, default_values
from trustgraph.prompt.service import SPEC as PROMPT_SPEC
from trustgraph.prompt.service import PromptSettings
from trustgraph.pubsub import Bus
from trustgraph.retrieval.document_rag.service import document_variables
from trustgraph.retrieval.graph_rag.service import kg_variables
from trustgraph.schema import (
    PromptRequest,
    PromptResponse,
    TextCompletionRequest,
    TextCompletionResponse,
    decode,
)

PEOPLE = {"type": "array", "items": {
    "type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"]}}

TEMPLATES = {
    "say": {"system": "You are terse.", "prompt": "Say {{ text }}"},
    "echo": {"prompt": "v1 {{ x }}"},
    "people": {"prompt": "{{ answer }}", "response-type": "json", "schema": PEOPLE},
    "people-lines": {"prompt": "{{ answer }}", "response-type": "jsonl",
                     "schema": PEOPLE["items"]},
}


async def echo(request: TextCompletionRequest, ctx: Context
               ) -> AsyncIterator[TextCompletionResponse]:
    """The scripted LLM: answers with the prompt itself, word by word."""
    words = request.prompt.split(" ")
    pieces = [w + " " for w in words[:-1]] + words[-1:]
    if request.streaming:
        for piece in pieces:
            yield TextCompletionResponse(response=piece)
    yield TextCompletionResponse(
        response="" if request.streaming else request.prompt, end_of_stream=True,
        in_token=len(words), out_token=len(pieces), model="echo")


class PromptProcessors:
    """Config, both LLMs and (``start_prompt``) the prompt processor, in this process."""

    def __init__(self, broker, openai_server, data_dir) -> None:
        self.broker = broker
        self.openai_server = openai_server
        self.data_dir = data_dir
        self.started: list[Processor] = []
        self.bus = Bus(broker.url)

    async def start(self, processor: Processor) -> Processor:
        self.started.append(processor)
        await processor.start()
        return processor

    async def start_backends(self) -> None:
        url = self.broker.url
        await self.start(Processor(CONFIG_SPEC, ConfigSettings(pulsar_url=url,
                                                         tg_data_dir=str(self.data_dir))))
        await self.start(Processor(spec_for("openai"), OpenAiSettings(
            pulsar_url=url, openai_base_url=self.openai_server.base_url)))
        await self.start(Processor(
            ProcessorSpec("scripted-llm", ProcessorSettings, lambda s: [Service(
                "text-completion", TextCompletionRequest, TextCompletionResponse, echo)]),
            ProcessorSettings(pulsar_url=url, tg_flows=["scripted"])))
        self.config = await ConfigClient.connect(self.bus, self._name())

    async def start_prompt(self) -> Processor:
        return await self.start(Processor(PROMPT_SPEC, PromptSettings(
            pulsar_url=self.broker.url, tg_flows=["default", "scripted"],
            tg_request_timeout=10)))

    async def requester(self, flow: str) -> Requester:
        requester = Requester(self.bus, "prompt", flow, self._name(), timing=Timing(timeout=10))
        await requester.start()
        return requester

    async def stop(self) -> None:
        await self.bus.close()
        for processor in reversed(self.started):
            await processor.stop()

    @staticmethod
    def _name() -> str:
        return f"test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def stack(broker, openai_server, tmp_path):
    """Config and both LLMs running; no prompt processor yet."""
    stack = PromptProcessors(broker, openai_server, tmp_path)
    try:
        await stack.start_backends()
        yield stack
    finally:
        await stack.stop()


@pytest.fixture
async def prompts(stack):
    """A prompt processor started on config holding the defaults plus TEMPLATES."""
    await stack.config.put_many("prompt", {**default_values(), **TEMPLATES})
    await stack.start_prompt()
    stack.llm = await stack.requester("default")
    stack.scripted = await stack.requester("scripted")
    probe = PromptRequest(id="no-such-template")  # answered with an error
    for requester in (stack.llm, stack.scripted):
        await answered(partial(requester.call, probe, PromptResponse), "prompt", timeout=10,
                       attempt=0.2)
    return stack


async def records(requester: Requester, request: PromptRequest) -> list[PromptResponse]:
    return [r async for r in requester.stream(request, PromptResponse)]


async def outcome(call) -> str:
    """The answer of a prompt call, or its error message."""
    try:
        return await call
    except ServiceError as error:
        return f"error: {error.error.message}"


async def test_defaults_stored_on_first_start_and_only_then(stack):
    """Laid out as TrustGraph's tools read them: ``template.<id>``, and ``system``."""
    first = await stack.start_prompt()
    assert await stack.config.list("prompt") == sorted(
        ["system", *(f"template.{id}" for id in DEFAULT_TEMPLATES)])
    assert await stack.config.values("prompt") == default_config()
    await stack.config.delete("prompt", "system", *(
        f"template.{id}" for id in DEFAULT_TEMPLATES if id != "kg-prompt"))
    await first.stop()
    await stack.start_prompt()
    assert await stack.config.list("prompt") == ["template.kg-prompt"]


async def test_a_template_at_trustgraphs_key_wins(prompts):
    """A template at ``template.<id>`` (where TrustGraph's tg-set-prompt puts it) is
    template ``<id>``, over one at plain ``<id>``."""
    await prompts.config.put_many("prompt", {
        "template.shout": {"id": "shout", "prompt": "LOUD {{ x }}", "response-type": "text"},
        "shout": {"prompt": "quiet {{ x }}"}})

    async def answer() -> str:
        return await outcome(PromptClient(prompts.scripted).prompt("shout", {"x": "hi"}))

    await eventually(answer, "the template", accept=lambda text: text == "LOUD hi")


async def test_text_streams_deltas_then_one_final_with_tokens(prompts):
    got = await records(prompts.llm, PromptRequest(
        id="say", variables={"text": "[tokens=20]"}, streaming=True))
    *deltas, final = got
    assert deltas and not any(r.end_of_stream for r in deltas)
    assert "".join(r.text for r in deltas) == expected_text(20)
    assert all(r.model is None and r.out_token is None for r in deltas)
    assert (final.end_of_stream, final.text, final.model) == (True, "", "fake-gpt")
    assert final.out_token == 20 and final.in_token > 0


async def test_non_streaming_text_is_one_record(prompts):
    request = PromptRequest(id="say", variables={"text": "[tokens=7]"})
    [record] = await records(prompts.llm, request)
    assert (record.end_of_stream, record.text, record.out_token) == (True, expected_text(7), 7)


async def test_first_delta_before_the_llm_finishes_and_cancel_reaches_it(prompts):
    # frames() rather than stream(): closing it sends the cancel at once (the
    # requester's own cancel path, not what this test is about).
    frames = prompts.llm.frames(PromptRequest(
        id="say", variables={"text": "[tokens=1000 delay=0.01]"}, streaming=True))
    first = decode(PromptResponse, (await anext(frames))[0][0])
    assert first.text.startswith("tok0 ") and not first.end_of_stream
    assert prompts.openai_server.stats.open_streams == 1  # ~10 s of tokens still to come
    await frames.aclose()
    await asyncio.wait_for(prompts.openai_server.disconnected.wait(), 2.0)


async def test_llm_error_mid_stream_is_passed_on_after_the_deltas(prompts):
    seen = []
    with pytest.raises(ServiceError) as failure:
        async for record in prompts.llm.stream(PromptRequest(
                id="say", variables={"text": "[tokens=10 fail_after=3]"}, streaming=True),
                PromptResponse):
            seen.append(record.text)
    assert failure.value.error.type == "llm-error"
    assert "".join(seen) == expected_text(3)


async def test_json_template_answers_once_with_a_checked_object_even_when_streaming(prompts):
    answer = 'Here it is:\n```json\n[{"name": "Ann", "age": 31}, {"name": "Bo", "age": 4}]\n```'
    [record] = await records(prompts.scripted, PromptRequest(
        id="people", variables={"answer": answer}, streaming=True))
    assert record.end_of_stream and record.text is None and record.model == "echo"
    assert json.loads(record.object) == [{"name": "Ann", "age": 31}, {"name": "Bo", "age": 4}]


async def test_jsonl_template_answers_with_a_list_of_its_lines(prompts):
    answer = '{"name": "Ann", "age": 31}\n{"name": "Bo", "age": 4}'
    [record] = await records(prompts.scripted, PromptRequest(
        id="people-lines", variables={"answer": answer}, streaming=True))
    assert json.loads(record.object) == [{"name": "Ann", "age": 31}, {"name": "Bo", "age": 4}]


@pytest.mark.parametrize("id, variables, error_type, message", [
    ("people", {"answer": '[{"name": "Ann", "age": "old"}]'}, "prompt-error",
     "does not match its schema at /0/age: 'old' is not of type 'integer'"),
    ("people", {"answer": "I cannot help with that."}, "prompt-error", "is not valid JSON"),
    ("people", {}, "bad-request",
     "template 'people': variable 'answer' is undefined (the request gave: none)"),
    ("echo", {"y": 1}, "bad-request", "variable 'x' is undefined (the request gave: y)"),
    ("missing", {}, "not-found",
     "no prompt template 'missing' (known: agent-classify, agent-code, "),
])
async def test_clear_errors(prompts, id, variables, error_type, message):
    stream = prompts.scripted.stream(PromptRequest(id=id, variables=variables, streaming=True),
                                     PromptResponse)
    with pytest.raises(ServiceError) as failure:
        async for record in stream:
            pytest.fail(f"nothing but the error should come: {record}")
    # The caller's mistakes have the types every service uses (the gateway answers
    # them 400 / 404); the model's bad answer is the prompt service's own failure.
    assert failure.value.error.type == error_type
    assert message in failure.value.error.message


async def test_legacy_terms_are_json_decoded(prompts):
    [record] = await records(prompts.scripted, PromptRequest(id="echo", terms={"x": '"hi"'}))
    assert record.text == "v1 hi"


async def test_edited_template_used_by_the_next_request_without_restart(prompts):
    client = PromptClient(prompts.scripted)
    assert await client.prompt("echo", {"x": "hi"}) == "v1 hi"
    await prompts.config.put("prompt", "echo", {"prompt": "v2 {{ x | upper }}"})
    ask = lambda: outcome(client.prompt("echo", {"x": "hi"}))  # noqa: E731
    await eventually(ask, "the edit to be used", accept=lambda answer: answer == "v2 HI",
                     timeout=5.0)

    await prompts.config.put("prompt", "echo", {"prompt": "{% if %}"})
    await eventually(ask, "the broken template to be refused", timeout=5.0,
                     accept=lambda answer: "template 'echo' in config is invalid" in answer)

    await prompts.config.delete("prompt", "echo")
    await eventually(ask, "the template to be gone", timeout=5.0,
                     accept=lambda answer: "no prompt template 'echo'" in answer)


async def test_prompt_client_returns_text_or_the_parsed_object(prompts):
    client = PromptClient(prompts.scripted)
    assert await client.prompt("people", {"answer": '[{"name": "A", "age": 1}]'}
                               ) == [{"name": "A", "age": 1}]
    result = await client.invoke("echo", {"x": "there"})
    assert (result.value, result.model, result.out_token) == ("v1 there", "echo", 2)


async def streamed(client: PromptClient, id: str, variables: dict,
                   chunks: list[str]) -> PromptResponse:
    """The text pieces into ``chunks`` (yielding to the loop between them, as a
    caller that sends each on would); returns the final record."""
    async with aclosing(client.stream(id, variables, lambda final: final)) as pieces:
        async for piece in pieces:
            if not isinstance(piece, Delta):
                return piece
            await asyncio.sleep(0)
            chunks.append(piece.text)


async def test_the_stream_yields_text_in_order_then_the_totals(prompts):
    chunks: list[str] = []
    end = await streamed(PromptClient(prompts.llm), "kg-prompt", kg_variables(
        "Who? [tokens=5 delay=0.05]", [("Acme", "founded by", "Ann")]), chunks)
    assert "".join(chunks) == expected_text(5)
    assert len(chunks) > 1  # tokens 50 ms apart arrive as pieces, not all at the end
    assert end.text == "" and end.out_token is not None and end.model

    chunks.clear()
    scripted = PromptClient(prompts.scripted)
    await streamed(scripted, "document-prompt", document_variables(
        "What is X?", ["X is a widget.", "Y is a gadget."]), chunks)
    answer = "".join(chunks)
    assert "[1]\nX is a widget.\n" in answer and "[2]\nY is a gadget.\n" in answer
    assert "Question: What is X?" in answer

    answer = await scripted.prompt("kg-prompt", kg_variables(
        "Who?", [("Acme", "founded by", "Ann")]))
    assert "- Acme | founded by | Ann\n" in answer  # collected: the same text, whole


async def test_prompt_client_passes_on_the_text_then_raises_the_error(prompts):
    chunks: list[str] = []
    with pytest.raises(ServiceError) as failure:
        await streamed(PromptClient(prompts.llm), "say",
                       {"text": "[tokens=10 fail_after=3]"}, chunks)
    assert failure.value.error.type == "llm-error"
    assert "".join(chunks) == expected_text(3)


async def test_cancelling_a_prompt_stream_stops_the_llm_stream(prompts):
    called = asyncio.Event()

    async def stuck() -> None:  # the caller goes away while handling a piece
        async with aclosing(PromptClient(prompts.llm).stream(
                "say", {"text": "[tokens=1000 delay=0.01]"}, lambda final: final)) as pieces:
            async for _ in pieces:
                called.set()
                await asyncio.Event().wait()

    call = asyncio.create_task(stuck())
    await asyncio.wait_for(called.wait(), 5.0)
    call.cancel()
    await asyncio.wait_for(prompts.openai_server.disconnected.wait(), 2.0)
    assert call.cancelled()
