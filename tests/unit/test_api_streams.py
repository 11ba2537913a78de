"""Text streams over scripted response frames: deltas, usage, the collected answer."""
import pytest

from trustgraph.api import Completion, TextStream, Usage
from trustgraph.schema import TextCompletionResponse


def frames(*responses):
    async def responses_():
        for response in responses:
            yield response
    return responses_


text = TextCompletionResponse  # the record whose text the stream reads


async def test_deltas_skip_empty_text_and_usage_sums_token_deltas():
    stream = TextStream(frames(
        {"response": "a", "in_token": 3},
        {"response": ""},
        {"response": "b", "out_token": 1, "model": "m1"},
        {"response": "", "end_of_stream": True, "in_token": 8, "out_token": 4, "model": "m2"},
    ), text)
    assert [delta async for delta in stream] == ["a", "b"]
    assert stream.usage == Usage(in_token=11, out_token=5, model="m2")


async def test_usage_unknown_until_reported():
    stream = TextStream(frames({"response": "x", "end_of_stream": True}), text)
    assert await stream.collect() == "x"
    assert stream.usage == Usage(None, None, None)


async def test_collect_is_a_str_with_usage():
    answer = await TextStream(frames({"response": "he"}, {"response": "llo", "in_token": 2,
                                                           "out_token": 2, "model": "m"}),
                              text).collect()
    assert isinstance(answer, str) and isinstance(answer, Completion)
    assert answer == "hello" and answer.upper() == "HELLO"
    assert answer.usage == Usage(2, 2, "m")


async def test_request_is_opened_when_iteration_starts_and_only_once():
    opened = []

    def responses():
        opened.append(True)
        return frames({"response": "x"})()

    stream = TextStream(responses, text)
    assert opened == []
    assert [d async for d in stream] == ["x"]
    with pytest.raises(RuntimeError):
        aiter(stream)
    assert opened == [True]
