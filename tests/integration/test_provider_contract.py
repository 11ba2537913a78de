"""One contract, every LLM provider: each runs through its real SDK against a local
server speaking that provider's streaming wire format (tests/support/*_server.py,
each listing its ``CASES``; the ``case`` fixture: tests/support/provider_cases.py).
Answers under a JSON Schema: test_provider_schemas.py."""
import asyncio
import json
import os
import signal

import pytest

from tests.support.local_llm import LOCAL_MAX_TOKENS, generating, predicted
from tests.support.scripted_llm import PROMPT_TOKENS, answered, collect, expected_text
from tests.support.waiting import eventually
from trustgraph.base import Context, Items
from trustgraph.model.text_completion.provider import LlmError, Options, Usage
from trustgraph.model.text_completion.retry import Retrying
from trustgraph.model.text_completion.service import completion_handler
from trustgraph.schema import TextCompletionRequest

SETTINGS = Options()  # a request asking nothing of its own: the settings apply


async def test_streams_deltas_in_order_then_usage(case):
    case, server, provider = case
    pieces, usage = await collect(answered(provider(), "Be terse.", "[tokens=40 delay=0.002]"))
    assert "".join(pieces) == expected_text(40)
    assert len(pieces) > 1  # paced: lines that arrive together may rightly be one piece
    assert usage == Usage(PROMPT_TOKENS, 40, case.model)


async def test_non_streaming_is_the_collected_stream(case):
    case, server, provider = case
    handler = completion_handler(provider())
    records = [r async for r in Items(handler(TextCompletionRequest(prompt="[tokens=9]"),
                                              Context("t", "default", None)))]
    assert len(records) == 1 and records[0].end_of_stream
    assert records[0].response == expected_text(9)
    assert (records[0].in_token, records[0].out_token, records[0].model) == \
        (PROMPT_TOKENS, 9, case.model)


OPTIONS = ("model", "max_tokens", "temperature", "stop")
ASKED = {"model": "asked-model", "max_tokens": 7, "temperature": 0.25, "stop": ["END", "STOP"]}


async def test_a_request_s_options_reach_the_wire_for_that_request_alone(case):
    # Through the service, as a request asks: each option the provider's API takes
    # is sent as the request asked (``case.honours``, docs/providers); the next
    # request, asking none, is sent the settings: nothing of the first was kept.
    case, server, provider = case
    honours = getattr(case, "honours", set(OPTIONS))
    asked = {**ASKED, "model": getattr(case, "asked_model", ASKED["model"])}
    handler = completion_handler(provider())
    [record] = [r async for r in Items(handler(
        TextCompletionRequest(prompt="[tokens=4]", **asked), Context("t", "default", None)))]
    assert record.response == expected_text(4)
    sent = server.asked()
    assert {name: sent[name] for name in honours} == {name: asked[name] for name in honours}
    assert all(sent[name] != asked[name] for name in set(OPTIONS) - honours)
    [record] = [r async for r in Items(handler(TextCompletionRequest(prompt="[tokens=2]"),
                                               Context("t", "default", None)))]
    assert record.response == expected_text(2)
    settled = server.asked()
    assert all(settled[name] != asked[name] for name in OPTIONS)
    assert settled["stop"] is None and settled["model"]


@pytest.mark.parametrize("failure", ["fail_after", "drop_after"])
async def test_failure_mid_stream_is_an_llm_error_after_the_earlier_tokens(case, failure):
    case, server, provider = case
    pieces = []
    with pytest.raises(LlmError) as error:
        async for piece in answered(provider(retries=3), "", f"[tokens=10 {failure}=3]"):
            pieces.append(piece)
    assert "".join(pieces) == expected_text(3)
    assert error.value.type == "llm-error" and error.value.message
    assert server.stats.requests == 1  # never retried once tokens were sent


async def test_overload_before_first_token_is_retried(case):
    case, server, provider = case
    pieces, usage = await collect(answered(provider(retries=3), "",
                                           "[tokens=3 status=429 fail_times=2]"))
    assert "".join(pieces) == expected_text(3)
    assert server.stats.requests == 3


async def test_persistent_overload_becomes_a_clear_error(case):
    case, server, provider = case
    with pytest.raises(LlmError, match="overloaded"):
        await collect(answered(provider(retries=1), "", "[status=429]"))
    assert server.stats.requests == 2


async def test_other_http_errors_are_not_retried(case):
    case, server, provider = case
    with pytest.raises(LlmError) as error:
        await collect(answered(provider(retries=3), "", "[status=400]"))
    assert error.value.type == "llm-error"
    assert server.stats.requests == 1


async def test_cancel_closes_the_http_stream(case):
    case, server, provider = case
    stream = answered(provider(), "", "[tokens=1000 delay=0.01]")
    await anext(stream)
    await anext(stream)
    await stream.aclose()
    await asyncio.wait_for(server.disconnected.wait(), 1.0)


# --- the local provider: the same contract with a real model --------------------
# llama.cpp serving the bundled SmolLM2-135M (tests/support/local_llm.py, fixtures
# in conftest.py): its
# words are its own, so these check the shape of what it sends, its real token
# counts, and what cancelling, waiting and a dead server do.

class TestLocalModel:
    pytestmark = pytest.mark.asyncio(loop_scope="module")

    async def test_streams_deltas_in_order_then_real_usage(self, local_llm):
        pieces, usage = await collect(local_llm.stream("Answer in one sentence.",
                                                        "What colour is the sky?", SETTINGS))
        assert len(pieces) > 1 and all(isinstance(p, str) for p in pieces)
        assert "".join(pieces).strip()
        assert usage.model == "SmolLM2-135M-Instruct.Q4_1"
        assert usage.in_token > 10  # the prompt in the model's chat template
        assert len(pieces) <= usage.out_token <= LOCAL_MAX_TOKENS

    async def test_non_streaming_is_one_record_with_real_counts(self, local_llm):
        handler = completion_handler(Retrying(local_llm, 0))
        records = [r async for r in Items(handler(
            TextCompletionRequest(system="Be brief.", prompt="Name a fruit."),
            Context("t", "default", None)))]
        assert len(records) == 1 and records[0].end_of_stream and records[0].response
        assert records[0].in_token > 0 and 0 < records[0].out_token <= LOCAL_MAX_TOKENS

    async def test_an_answer_under_a_schema_is_held_to_it_by_the_grammar(self, local_llm):
        # llama.cpp's json_schema becomes a grammar that constrains sampling: even the
        # demo model answers in the shape, with words it would hardly choose unasked,
        # streamed as it writes them and checked at the end.
        # Written in the schema's order (not sorted: the agent's thought comes first).
        schema = {"type": "object", "additionalProperties": False,
                  "required": ["count", "colour"],
                  "properties": {"count": {"type": "integer", "minimum": 1, "maximum": 9},
                                 "colour": {"type": "string", "enum": ["vermilion", "teal"]}}}
        handler = completion_handler(Retrying(local_llm, 0))
        for streaming in (False, True):
            records = [r async for r in Items(handler(TextCompletionRequest(
                prompt="Name a colour and a number.", json_schema=schema,
                streaming=streaming), Context("t", "default", None)))]
            text = "".join(getattr(r, "text", None) or r.response for r in records)
            value = json.loads(text)
            assert value["colour"] in ("vermilion", "teal") and 1 <= value["count"] <= 9
            assert list(value) == ["count", "colour"]
            assert records[-1].end_of_stream and (len(records) > 2) == streaming

    async def test_a_request_s_options_apply_to_it_alone_but_its_model_is_the_gguf(
            self, local_llm):
        # One model is served: a request naming another is answered, and told so, by
        # it; its max_tokens holds for it, and the next request has the settings.
        prompt = "Write three sentences about the sea."
        short = Options(model="another-model", max_tokens=3, temperature=0.5, stop=["\n\n"])
        _, usage = await collect(local_llm.stream("", prompt, short))
        assert usage.model == "SmolLM2-135M-Instruct.Q4_1"
        assert 0 < usage.out_token <= 3
        _, usage = await collect(local_llm.stream("", prompt, SETTINGS))
        assert 3 < usage.out_token <= LOCAL_MAX_TOKENS

    async def test_closing_a_stream_stops_its_generation_and_frees_the_sequence(
            self, local_llm_long):
        before = await predicted(local_llm_long)
        stream = local_llm_long.stream("", "Write a very long story about a dragon.", SETTINGS)
        for _ in range(3):
            await anext(stream)
        assert await generating(local_llm_long) == 1
        await stream.aclose()
        await eventually(lambda: generating(local_llm_long), "the sequence to be freed",
                         accept=lambda n: n == 0)
        # Stopped where it was closed, a few tokens on (one more decode per delta in
        # flight), not run on to its limit.
        assert 3 <= await predicted(local_llm_long) - before < 40

    async def test_requests_beyond_the_sequences_wait_and_a_cancelled_one_costs_nothing(
            self, local_llm_long):
        busy = [local_llm_long.stream("", f"Count to a thousand, story {i}.", SETTINGS)
                for i in (1, 2)]
        for stream in busy:
            await anext(stream)
        waiting = asyncio.ensure_future(collect(local_llm_long.stream("", "Hello", SETTINGS)))
        await eventually(lambda: local_llm_long.waiting == 1, "the third request to wait")
        assert await generating(local_llm_long) == 2
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        assert local_llm_long.waiting == 0
        for stream in busy:
            await stream.aclose()
        await eventually(lambda: generating(local_llm_long), "both to be freed",
                         accept=lambda n: n == 0)

    async def test_a_prompt_beyond_the_context_is_a_clear_error(self, local_llm):
        with pytest.raises(LlmError, match="context"):
            await collect(local_llm.stream("", "word " * 3000, SETTINGS))

    async def test_a_dead_server_fails_its_request_and_the_next_one_restarts_it(
            self, local_llm):
        stream = local_llm.stream("", "Tell me about the sea.", SETTINGS)
        await anext(stream)
        old = local_llm.process.pid
        os.kill(old, signal.SIGKILL)
        with pytest.raises(LlmError, match="exited|local model"):
            async for _ in stream:
                pass
        pieces, usage = await collect(local_llm.stream("", "Say hello.", SETTINGS))
        assert pieces and usage.out_token > 0
        assert local_llm.process.pid not in (None, old)


def test_a_missing_or_foreign_model_file_is_named_at_start(tmp_path):
    from trustgraph.model.text_completion.local import provider as local
    with pytest.raises(SystemExit, match="cannot read .*nothing.gguf"):
        local.make(local.Settings(tg_local_model=str(tmp_path / "nothing.gguf")))
    (tmp_path / "notes.gguf").write_text("not a model")
    with pytest.raises(SystemExit, match="notes.gguf is not a GGUF"):
        local.make(local.Settings(tg_local_model=str(tmp_path / "notes.gguf")))
