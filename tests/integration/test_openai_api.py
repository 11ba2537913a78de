"""The OpenAI-compatible API (PROTOCOL §3b, docs/openai.md), driven by the official
``openai`` SDK, sync and async, streamed and not, against every model: a gateway in
front of the real text-completion (the openai provider → the scripted OpenAI-format
server), prompt, librarian, agent and lazy-rag processors and the scripted graph-rag
and document-rag services (tests/support/gateway_rig.py). One rig serves the module.

The sync client blocks: it runs on a thread, so the gateway (on this loop) serves it.
"""
import asyncio
import json
import uuid

import aiohttp
import openai
import pytest
import pytest_asyncio

from tests.support.agent_llm import AgentReplies, final, step
from tests.support.gateway_rig import gateway_rig
from tests.support.openai_server import PROMPT_TOKENS, Script, expected_text
from tests.support.scripted_llm import words
from tests.support.scripted_rag import gateways, wire_sources
from tests.support.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEADLINE = 30.0
MODELS = ["llm", "document-rag", "graph-rag", "lazy-rag", "agent"]
RAG = {"document-rag", "graph-rag", "lazy-rag"}
AGENT_QUESTION = "Who founded Acme?"
AGENT_ANSWER = "Ann Smith founded Acme."
AGENT_REPLY = final("The graph says so.", AGENT_ANSWER)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def rig(broker, llm, module_data_dir):
    async with gateway_rig(broker.url, llm.base_url, module_data_dir) as rig:
        yield rig


@pytest.fixture(autouse=True)
def scripted(llm):
    llm.script, llm.reply = Script(), AgentReplies(react={AGENT_QUESTION: [AGENT_REPLY]})


@pytest_asyncio.fixture(loop_scope="module")
async def client(rig):
    async with openai.AsyncOpenAI(base_url=rig.url + "v1", api_key="unused",
                                  max_retries=0) as client:
        yield client


@pytest.fixture
def sync_client(rig):
    with openai.OpenAI(base_url=rig.url + "api/v1/openai", api_key="unused",
                       max_retries=0) as client:
        yield client


def question(model: str, tokens: int = 6) -> str:
    return AGENT_QUESTION if model == "agent" else f"What happened? [tokens={tokens}]"


def expected(model: str, tokens: int = 6) -> tuple[str, tuple[int, int]]:
    """The answer's text and its usage (prompt, completion tokens)."""
    if model == "agent":
        return AGENT_ANSWER, (PROMPT_TOKENS, len(words(AGENT_REPLY)))
    return expected_text(tokens), (PROMPT_TOKENS, tokens)


def sources_of(model: str) -> list[dict] | None:
    if model in ("document-rag", "graph-rag"):
        return wire_sources(model)
    return [] if model == "lazy-rag" else None  # lazy-rag: an empty graph here


def asked(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


# --- models ----------------------------------------------------------------------------

async def test_models_are_listed_with_the_caller_s_collections(rig, client, sync_client):
    listed = [model.id for model in (await client.models.list()).data]
    assert listed[:5] == ["document-rag", "graph-rag", "lazy-rag", "agent", "llm"]
    await library_document(rig, "papers")
    listed = [model.id for model in (await asyncio.to_thread(sync_client.models.list)).data]
    assert {"document-rag:papers", "graph-rag:papers", "lazy-rag:papers",
            "agent:papers"} <= set(listed) and "llm:papers" not in listed
    model = await client.models.retrieve("graph-rag:papers")
    assert (model.id, model.object, model.owned_by) == ("graph-rag:papers", "model",
                                                         "trustgraph")


async def library_document(rig, collection: str) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{rig.url}api/v1/flow/{rig.flow}/service/librarian", json={
                "operation": "add-document", "document_id": f"d-{uuid.uuid4().hex[:6]}",
                "collection": collection, "content": "aGVsbG8="}) as response:
            assert response.status == 200, await response.text()


# --- each model, collected and streamed -------------------------------------------------

@pytest.mark.parametrize("model", MODELS)
async def test_each_model_answers_with_the_sync_client(sync_client, model):
    completion = await asyncio.to_thread(
        sync_client.chat.completions.create, model=model, messages=asked(question(model)))
    text, (prompt_tokens, completion_tokens) = expected(model)
    assert completion.object == "chat.completion" and completion.model == model
    [choice] = completion.choices
    assert (choice.message.role, choice.message.content, choice.finish_reason) == (
        "assistant", text, "stop")
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens,
            completion.usage.total_tokens) == (prompt_tokens, completion_tokens,
                                               prompt_tokens + completion_tokens)
    assert (completion.model_extra or {}).get("sources") == sources_of(model)


@pytest.mark.parametrize("model", MODELS)
async def test_each_model_streams_with_the_async_client(client, model):
    stream = await client.chat.completions.create(
        model=model, messages=asked(question(model)), stream=True,
        stream_options={"include_usage": True})
    chunks = [chunk async for chunk in stream]
    text, (prompt_tokens, completion_tokens) = expected(model)
    first, *middle, last, usage = chunks
    assert first.choices[0].delta.role == "assistant" and not first.choices[0].delta.content
    assert (first.model_extra or {}).get("sources") == sources_of(model)
    assert "".join(chunk.choices[0].delta.content or "" for chunk in middle) == text
    assert all(chunk.choices[0].finish_reason is None for chunk in [first, *middle])
    assert last.choices[0].finish_reason == "stop" and not last.choices[0].delta.content
    assert usage.choices == [] and (usage.usage.prompt_tokens, usage.usage.completion_tokens
                                    ) == (prompt_tokens, completion_tokens)
    assert all(chunk.usage is None for chunk in chunks[:-1])
    assert {chunk.id for chunk in chunks} == {first.id} and first.id.startswith("chatcmpl-")
    assert {chunk.object for chunk in chunks} == {"chat.completion.chunk"}


async def test_sync_streaming_without_usage_has_no_usage_chunk(sync_client):
    def read() -> list:
        return list(sync_client.chat.completions.create(
            model="llm", messages=asked("[tokens=3]"), stream=True))
    chunks = await asyncio.to_thread(read)
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert "".join(chunk.choices[0].delta.content or "" for chunk in chunks) == expected_text(3)
    assert all(chunk.usage is None and "usage" not in chunk.model_fields_set
               for chunk in chunks)


async def test_the_wire_is_openai_s_sse_with_the_sources_before_the_first_token(client):
    async with client.chat.completions.with_streaming_response.create(
            model="document-rag", messages=asked("Why? [tokens=4]"), stream=True,
            stream_options={"include_usage": True}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line async for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines) and lines[-1] == "data: [DONE]"
    events = [json.loads(line[6:]) for line in lines[:-1]]
    head = {"id": events[0]["id"], "object": "chat.completion.chunk",
            "created": events[0]["created"], "model": "document-rag"}
    assert events[0] == {**head, "choices": [{
        "index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
        "finish_reason": None}], "usage": None, "sources": wire_sources("document-rag")}
    # The text comes in as many chunks as the deltas were read (waiting ones joined).
    texts = [event["choices"][0]["delta"].get("content") for event in events[1:-2]]
    assert all(isinstance(text, str) and text for text in texts)
    assert "".join(texts) == expected_text(4)
    assert events[1:-2] == [{**head, "choices": [{
        "index": 0, "delta": {"content": text}, "logprobs": None,
        "finish_reason": None}], "usage": None} for text in texts]
    assert events[-2] == {**head, "choices": [{
        "index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}], "usage": None}
    assert events[-1] == {**head, "choices": [], "usage": {
        "prompt_tokens": PROMPT_TOKENS, "completion_tokens": 4,
        "total_tokens": PROMPT_TOKENS + 4}}


# --- what reaches the services ------------------------------------------------------------

async def test_max_tokens_temperature_and_stop_reach_the_llm(rig, llm, client):
    await client.chat.completions.create(model="llm", messages=asked("[tokens=2]"),
                                         max_tokens=5, temperature=0.3, stop="END")
    assert llm.sampled(llm.last_body) == {"max_tokens": 5, "temperature": 0.3,
                                          "stop": ["END"]}
    await client.chat.completions.create(model="document-rag", messages=asked("[tokens=2]"),
                                         max_completion_tokens=9, stop=["a", "b"])
    request = rig.rag.requests[-1]
    assert (request.max_tokens, request.temperature, request.stop) == (9, None, ["a", "b"])


async def test_the_collection_comes_from_the_model_or_the_field(rig, client):
    await client.chat.completions.create(model="graph-rag:papers", messages=asked("q"))
    assert (rig.rag.requests[-1].user, rig.rag.requests[-1].collection) == (
        "trustgraph", "papers")
    await client.chat.completions.create(model="document-rag", messages=asked("q"),
                                         extra_body={"collection": "notes"})
    assert rig.rag.requests[-1].collection == "notes"


async def test_llm_gets_the_system_text_and_the_conversation(llm, client):
    await client.chat.completions.create(model="llm", messages=[
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Who founded Acme?"},
        {"role": "assistant", "content": "Ann Smith."},
        {"role": "user", "content": [{"type": "text", "text": "When? [tokens=2]"}]}])
    system, user = llm.last_body["messages"]
    assert system == {"role": "system", "content": "Be brief."}
    assert "User: Who founded Acme?\nAssistant: Ann Smith." in user["content"]
    assert user["content"].endswith("When? [tokens=2]")


async def test_a_follow_up_is_rewritten_to_stand_alone_before_retrieval(rig, llm, client):
    llm.reply = AgentReplies(reformulated={"When?": "When was Acme founded? [tokens=3]"})
    completion = await client.chat.completions.create(model="document-rag", messages=[
        {"role": "user", "content": "Who founded Acme?"},
        {"role": "assistant", "content": "Ann Smith."},
        {"role": "user", "content": "When?"}])
    assert rig.rag.requests[-1].query == "When was Acme founded? [tokens=3]"
    assert completion.model_extra["standalone_question"] == rig.rag.requests[-1].query
    assert completion.choices[0].message.content == expected_text(3)
    rewrite_tokens = len(words("When was Acme founded? [tokens=3]"))
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (
        2 * PROMPT_TOKENS, rewrite_tokens + 3)


async def test_numbered_citations_follow_the_answer_when_asked(client):
    completion = await client.chat.completions.create(
        model="graph-rag", messages=asked("[tokens=2]"), extra_body={"citations": True})
    assert completion.choices[0].message.content == expected_text(2) + (
        "\n\nSources:\n[1] default document 1 (doc1)\n[2] default document 2 (doc2)")


# --- the agent ------------------------------------------------------------------------

async def test_the_agent_s_steps_are_reasoning_and_its_session_continues(rig, llm, client):
    llm.reply = AgentReplies(react={"Who runs Acme?": [
        step("I should ask the graph.", "knowledge-query", question="[tokens=3]"),
        final("Now I know.", "Bo Li runs Acme.")]})
    stream = await client.chat.completions.create(
        model="agent", messages=asked("Who runs Acme?"), stream=True)
    chunks = [chunk async for chunk in stream]
    session = chunks[0].model_extra["session_id"]
    deltas = [chunk.choices[0].delta for chunk in chunks]
    reasoning = "".join(delta.model_extra.get("reasoning_content") or "" for delta in deltas)
    assert reasoning.startswith("I should ask the graph.")
    assert 'Action: knowledge-query {"question": "[tokens=3]"}' in reasoning
    assert f"Observation: {expected_text(3)}" in reasoning and "Now I know." in reasoning
    steps = [delta.model_extra["agent_step"] for delta in deltas
             if delta.model_extra.get("agent_step")]
    assert steps[0] == {"chunk_type": "action", "delta": "knowledge-query",
                        "tool": "knowledge-query", "arguments": {"question": "[tokens=3]"}}
    assert "".join(delta.content or "" for delta in deltas) == "Bo Li runs Acme."

    llm.reply = AgentReplies(react={"And who founded it?": [final("Known.", "Ann did.")]})
    completion = await client.chat.completions.create(
        model="agent", messages=asked("And who founded it?"),
        extra_body={"session_id": session})
    assert completion.choices[0].message.content == "Ann did."
    assert completion.model_extra["session_id"] == session
    assert "Who runs Acme?" in llm.prompts[-1]  # the session's earlier turn, remembered
    assert completion.choices[0].message.model_extra["reasoning_content"] == "Known."


# --- errors and cancellation -----------------------------------------------------------

async def test_errors_are_openai_s_shape_and_status(client):
    with pytest.raises(openai.NotFoundError) as unknown:
        await client.chat.completions.create(model="gpt-4", messages=asked("q"))
    assert unknown.value.body["code"] == "model_not_found"
    assert unknown.value.body["type"] == "invalid_request_error"
    with pytest.raises(openai.BadRequestError) as bad:
        await client.chat.completions.create(model="llm", messages=asked("q"), n=2)
    assert bad.value.body["message"].startswith("n:")
    with pytest.raises(openai.BadRequestError) as last:
        await client.chat.completions.create(model="llm", messages=[
            {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])
    assert last.value.body["message"].startswith("messages:")
    with pytest.raises(openai.BadRequestError):
        await client.chat.completions.create(model="llm:papers", messages=asked("q"))


async def test_a_failure_mid_stream_raises_after_the_tokens_before_it(rig, client):
    stream = await client.chat.completions.create(
        model="graph-rag", messages=asked("[tokens=10 fail_after=4 delay=0.01]"), stream=True)
    text = []
    with pytest.raises(openai.APIError) as failed:
        async for chunk in stream:
            text.append(chunk.choices[0].delta.content or "")
    assert "".join(text) == expected_text(4)
    assert failed.value.body == {"message": "scripted failure", "type": "server_error",
                                 "param": None, "code": "graph-rag-error"}


async def test_a_failure_before_the_first_token_is_its_http_status(client):
    with pytest.raises(openai.InternalServerError) as failed:  # the LLM refused
        await client.chat.completions.create(model="llm", stream=True,
                                             messages=asked("[status=500]"))
    assert failed.value.status_code == 502 and failed.value.body["code"] == "llm-error"


async def test_a_key_is_asked_for_and_checked(rig, broker):
    async with gateways(broker.url, rig.flow, token="s3cret") as [_, guarded]:
        async with openai.AsyncOpenAI(base_url=guarded + "v1", api_key="wrong",
                                      max_retries=0) as wrong:
            with pytest.raises(openai.AuthenticationError) as refused:
                await wrong.chat.completions.create(model="llm", messages=asked("q"))
        assert refused.value.body["type"] == "authentication_error"
        assert refused.value.body["code"] == "auth-failed"
        async with openai.AsyncOpenAI(base_url=guarded + "v1", api_key="s3cret",
                                      max_retries=0) as right:
            answered = await right.chat.completions.create(
                model="llm", messages=asked("[tokens=2]"))
        assert answered.choices[0].message.content == expected_text(2)


async def test_a_client_that_leaves_cancels_the_llm_stream(rig, llm, client):
    before = len(llm.stats.closed_early)
    stream = await client.chat.completions.create(
        model="llm", messages=asked("[tokens=500 delay=0.02]"), stream=True)
    async for chunk in stream:
        if chunk.choices[0].delta.content:
            break
    await stream.close()
    await eventually(lambda: len(llm.stats.closed_early),
                     "the LLM stream closed early", accept=lambda n: n > before,
                     timeout=DEADLINE)
    await eventually(rig.in_flight, "nothing left in flight",
                     accept=lambda n: n == 0, timeout=DEADLINE)


async def test_a_sync_client_that_leaves_cancels_the_rag_answer(rig, sync_client):
    query = f"[tokens=500 delay=0.02] {uuid.uuid4().hex}"

    def read_a_little() -> None:
        with sync_client.chat.completions.create(
                model="document-rag", messages=asked(query), stream=True) as stream:
            for chunk in stream:
                if chunk.choices[0].delta.content:
                    return
    await asyncio.to_thread(read_a_little)
    await rig.rag.wait_cancelled(query, DEADLINE)
