"""Deltas on their way (``trustgraph.base.relay``): a delta written as each service's
record without building it, the one ``coalesce`` that joins what waits together, and
``relay`` passing one service's answer on as another's; and ``Items``, which reads a
handler's sub-streams in their place."""
import json
from contextlib import aclosing

import pytest

from trustgraph.base import Delta, Items, ServiceError, coalesce, relay
from trustgraph.schema import (
    AgentResponse,
    Error,
    LazyRagResponse,
    PromptResponse,
    RagResponse,
    Response,
    TextCompletionResponse,
    encode,
)

TEXTS = ["tok", "", 'quote " backslash \\ newline \n tab \t', "\x01\x1f\x7f", "héllo 世界 🙂",
         "\u2028\u2029", "</script>"]


def frame(final: bool = False, **record) -> tuple[bytes, bool]:
    return json.dumps(record, separators=(",", ":")).encode(), final


def decoded(frames):
    return [(json.loads(data), final) for data, final in frames]


# --- a delta as each service's record ---------------------------------------------------

@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("model, marks", [
    (TextCompletionResponse, {}), (PromptResponse, {}),
    (RagResponse, {"message_type": "chunk"}), (LazyRagResponse, {"message_type": "chunk"})])
def test_a_delta_is_written_exactly_as_its_record_would_be(model, marks, text):
    assert Delta(text).encoded_as(model) == encode(model(**marks, **{model.delta_field: text}))


@pytest.mark.parametrize("kind", ["thought", "answer"])
def test_an_agent_delta_is_written_as_its_kind_of_frame(kind):
    assert Delta("tok", kind).encoded_as(AgentResponse) == encode(
        AgentResponse(chunk_type=kind, content="tok"))


def test_the_delta_field_is_declared_once_per_record():
    assert [m.delta_field for m in (TextCompletionResponse, PromptResponse, RagResponse,
                                    LazyRagResponse, AgentResponse)] == [
        "response", "text", "chunk", "chunk", "content"]
    assert "delta_field" not in TextCompletionResponse.model_fields  # never travels
    with pytest.raises(TypeError, match="streams no text"):
        Delta("x").encoded_as(Response)


# --- coalesce: records from the bus ----------------------------------------------------

def test_a_batch_of_one_is_returned_untouched():
    batch = [frame(response="tok0 ")]
    assert coalesce(batch, TextCompletionResponse) is batch


def test_consecutive_deltas_merge_and_the_final_stays_separate():
    batch = [frame(end_of_stream=False, response="a"), frame(end_of_stream=False, response="b"),
             frame(end_of_stream=False, response="c"),
             frame(True, end_of_stream=True, response="", in_token=11, out_token=3)]
    merged = coalesce(batch, TextCompletionResponse)
    assert decoded(merged) == [({"end_of_stream": False, "response": "abc"}, False),
                               decoded(batch[-1:])[0]]
    assert merged[-1][0] is batch[-1][0]  # the final record's bytes are passed through


def test_token_counts_are_summed_and_other_fields_come_from_the_last():
    batch = [frame(response="a", in_token=1, out_token=2, model="m1"),
             frame(response="b", in_token=3, out_token=4, model="m2")]
    assert decoded(coalesce(batch, TextCompletionResponse)) == [
        ({"response": "ab", "in_token": 4, "out_token": 6, "model": "m2"}, False)]


def test_records_with_different_fields_are_not_merged():
    batch = [frame(response="a"), frame(response="b", model="m"), frame(response="c", model="m")]
    merged = coalesce(batch, TextCompletionResponse)
    assert merged[0] == batch[0]
    assert decoded(merged[1:]) == [({"response": "bc", "model": "m"}, False)]


def test_never_merges_across_a_final_record():
    batch = [frame(response="a"), frame(True, response="b"), frame(response="c")]
    assert coalesce(batch, TextCompletionResponse) == batch


def test_records_without_the_delta_field_pass_through():
    batch = [frame(message_type="metadata", sources=[1]),
             frame(message_type="metadata", sources=[2]), frame(chunk="x")]
    assert coalesce(batch, RagResponse) == batch


def test_a_lone_mergeable_record_keeps_its_original_bytes():
    batch = [frame(response="a"), frame(True, response="")]
    assert coalesce(batch, TextCompletionResponse)[0][0] is batch[0][0]


def test_non_ascii_text_survives_merging():
    batch = [frame(response="héllo "), frame(response="世界 "), frame(response="🙂")]
    merged = coalesce(batch, TextCompletionResponse)
    assert json.loads(merged[0][0])["response"] == "héllo 世界 🙂"


def test_a_model_that_streams_no_text_is_never_merged():
    batch = [frame(response="a"), frame(response="b")]
    assert coalesce(batch, Response) is batch


def agent(kind: str, content: str, **flags) -> tuple[bytes, bool]:
    return encode(AgentResponse(chunk_type=kind, content=content, **flags)), False


def test_the_agents_declared_run_rule_keeps_messages_apart():
    """``run_fields``: a thought never runs into the answer after it; ``run_end``: a
    piece that ends its message stands alone."""
    batch = [agent("thought", "a"), agent("thought", "b"),
             agent("thought", "c", end_of_message=True), agent("thought", "d"),
             agent("answer", "x"), agent("answer", "y")]
    assert [(r["chunk_type"], r["content"]) for r, _ in decoded(
        coalesce(batch, AgentResponse))] == [
        ("thought", "ab"), ("thought", "c"), ("thought", "d"), ("answer", "xy")]


# --- coalesce: deltas in one process ----------------------------------------------------

def test_waiting_deltas_join_into_one_and_records_stay_apart():
    final = encode(TextCompletionResponse(end_of_stream=True, out_token=3))
    batch = [(Delta("a"), False), (Delta("b"), False), (final, True)]
    [(joined, joined_final), (last, last_final)] = coalesce(batch, TextCompletionResponse)
    assert (joined.text, joined_final, last, last_final) == ("ab", False, final, True)
    lone = (Delta("x"), False)
    assert coalesce([lone, (final, True)], TextCompletionResponse)[0][0] is lone[0]


def test_waiting_deltas_of_different_kinds_stay_apart():
    batch = [(Delta("a", "thought"), False), (Delta("b", "thought"), False),
             (Delta("c", "answer"), False), (Delta("d", "answer"), False)]
    assert [(d.text, d.kind) for d, _ in coalesce(batch, AgentResponse)] == [
        ("ab", "thought"), ("cd", "answer")]


# --- relay --------------------------------------------------------------------------------

async def batches(*batches):
    for batch in batches:
        yield batch


def prompt_final(final: TextCompletionResponse) -> PromptResponse:
    return PromptResponse(text=final.response, end_of_stream=True, out_token=final.out_token)


async def relayed(source, *batches_) -> list:
    return [item async for item in relay(batches(*batches_), source, prompt_final)]


async def test_deltas_in_one_process_are_passed_on_as_they_are():
    one, two = Delta("a "), Delta("b ")
    final = encode(TextCompletionResponse(end_of_stream=True, out_token=2))
    items = await relayed(TextCompletionResponse, [(one, False)], [(two, False), (final, True)])
    assert items[0] is one and items[1] is two
    assert items[2] == PromptResponse(text="", end_of_stream=True, out_token=2)


async def test_deltas_from_the_bus_become_deltas_and_those_waiting_one():
    final = frame(True, end_of_stream=True, response="", out_token=3)
    items = await relayed(TextCompletionResponse,
                          [frame(response="a ")], [frame(response="b "), frame(response="c "),
                                                   final])
    assert [item.text for item in items[:-1]] == ["a ", "b c "]
    assert items[-1].out_token == 3


async def test_records_without_text_are_not_passed_on():
    final = frame(True, end_of_stream=True, message_type="chunk", chunk="")
    items = [item async for item in relay(batches(
        [frame(message_type="metadata", sources=[]), frame(message_type="chunk", chunk="x")],
        [final]), RagResponse, lambda record: record)]
    assert [item.text for item in items[:-1]] == ["x"]


async def test_not_streaming_the_one_final_record_is_made_the_relays_own():
    whole = encode(TextCompletionResponse(response="all of it", end_of_stream=True))
    assert await relayed(TextCompletionResponse, [(whole, True)]) == [
        PromptResponse(text="all of it", end_of_stream=True)]


async def test_an_error_record_raises_after_what_came_before():
    failure = encode(TextCompletionResponse.failure(Error(type="llm-error", message="boom")))
    seen = []
    with pytest.raises(ServiceError, match="llm-error: boom"):
        async for item in relay(batches([(Delta("a"), False)], [(failure, True)]),
                                TextCompletionResponse, prompt_final):
            seen.append(item)
    assert [item.text for item in seen] == ["a"]


async def test_closing_the_relay_closes_its_source():
    closed = []

    async def source():
        try:
            yield [(Delta("a"), False)]
            yield [(Delta("b"), False)]
        finally:
            closed.append(True)

    async with aclosing(relay(source(), TextCompletionResponse, prompt_final)) as items:
        assert (await anext(items)).text == "a"
    assert closed == [True]


# --- Items: a handler's sub-streams read in their place ---------------------------------

def rag(chunk: str, final: bool = False) -> RagResponse:
    return RagResponse(message_type="chunk", chunk=chunk, end_of_stream=final)


async def test_a_returned_record_is_the_one_item():
    async def handle():
        return rag("", final=True)
    assert [item async for item in Items(handle())] == [rag("", final=True)]


async def test_sub_streams_are_read_in_their_place_however_deep():
    async def inner():
        yield rag("b")
        yield deeper()

    async def deeper():
        yield rag("c")

    async def handler():
        yield rag("a")
        yield inner()
        yield rag("", final=True)

    async def returning():
        return handler()

    assert [item.chunk async for item in Items(handler())] == ["a", "b", "c", ""]
    assert [item.chunk async for item in Items(returning())] == ["a", "b", "c", ""]


async def test_an_error_in_a_sub_stream_is_raised_where_it_was_yielded():
    async def failing():
        yield rag("a")
        raise ServiceError(Error(type="prompt-error", message="down"))

    async def handler():
        try:
            yield failing()
        except ServiceError as error:
            yield rag(f"handled {error.error.type}", final=True)

    assert [item.chunk async for item in Items(handler())] == ["a", "handled prompt-error"]


async def test_an_error_nobody_handles_comes_out():
    async def failing():
        raise ValueError("bad")
        yield

    async def handler():
        yield failing()

    with pytest.raises(ValueError, match="bad"):
        [item async for item in Items(handler())]


async def test_closing_closes_every_open_generator_innermost_first():
    closed = []

    def closing(name, *items):
        async def stream():
            try:
                for item in items:
                    yield item
            finally:
                closed.append(name)
        return stream()

    items = Items(closing("outer", closing("inner", rag("a"), rag("b"))))
    assert (await anext(items)).chunk == "a"
    await items.aclose()
    assert closed == ["inner", "outer"]
