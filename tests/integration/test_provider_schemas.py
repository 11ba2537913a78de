"""Answers under a JSON Schema, every provider (the contract suite's ``case``): each
sends the schema in its own server's format (the case's ``mechanism``, read back by
that server), and text-completion checks what comes back: an off-schema answer is
asked for once more, told what was wrong, then fails; streamed, it fails at its end."""
import json

import pytest

from trustgraph.base import Context, HandledError, Items
from trustgraph.model.text_completion.service import completion_handler
from trustgraph.model.text_completion.structured import OFF_SCHEMA
from trustgraph.schema import TextCompletionRequest

# Fits OpenAI's strict mode as it is, so every provider sends exactly this.
SCHEMA = {"type": "object", "additionalProperties": False, "required": ["colour", "count"],
          "properties": {"colour": {"type": "string", "enum": ["red", "green"]},
                         "count": {"type": "integer"}}}
VALID = '{"colour": "green", "count": 3}'
OFF = '{"colour": "purple", "count": 3}'
CUT = '{"colour": "gre'
TOLD = "could not be used"  # what a second asking says about the first answer


async def answer(provider, streaming: bool = False, schema: dict = SCHEMA,
                 prompt: str = "Answer.") -> list:
    handler = completion_handler(provider)
    request = TextCompletionRequest(prompt=prompt, json_schema=schema, streaming=streaming)
    return [record async for record in Items(handler(request, Context("t", "default", None)))]


def text_of(records: list) -> str:
    return "".join(getattr(record, "text", None) or getattr(record, "response", "")
                   for record in records)


async def test_the_schema_goes_out_in_the_server_s_own_format(case):
    case, server, provider = case
    server.reply = lambda prompt: VALID
    records = await answer(provider())
    assert server.asked()["schema"] == {"mechanism": case.mechanism, "schema": SCHEMA}
    [final] = records
    assert json.loads(final.response) == json.loads(VALID) and final.end_of_stream
    assert server.stats.requests == 1


async def test_a_streamed_answer_comes_as_written_and_ends_checked(case):
    case, server, provider = case
    server.reply = lambda prompt: VALID
    records = await answer(provider(), streaming=True, prompt="[delay=0.002]")
    assert text_of(records) == VALID
    # Paced word by word (words that arrive together may rightly be one piece).
    assert records[-1].end_of_stream and len(records) > 2


@pytest.mark.parametrize("bad", [OFF, CUT], ids=["off-schema", "cut-short"])
async def test_a_bad_answer_is_asked_for_again_then_fails_clearly(case, bad):
    case, server, provider = case
    server.reply = lambda prompt: bad
    with pytest.raises(HandledError) as failure:
        await answer(provider())
    assert failure.value.type == OFF_SCHEMA
    assert ("/colour" in failure.value.message) if bad == OFF else \
        ("not valid JSON" in failure.value.message)
    assert server.stats.requests == 2 and TOLD in server.prompts[1]


async def test_a_second_asking_that_fits_is_the_answer(case):
    case, server, provider = case
    server.reply = lambda prompt: VALID if TOLD in prompt else OFF
    [final] = await answer(provider())
    assert json.loads(final.response) == json.loads(VALID)
    assert final.out_token == 2 * len(VALID.split())  # both askings counted
    assert server.stats.requests == 2


async def test_a_streamed_off_schema_answer_fails_at_its_end_unasked_again(case):
    case, server, provider = case
    server.reply = lambda prompt: OFF
    got = []
    with pytest.raises(HandledError) as failure:
        async for record in Items(completion_handler(provider())(
                TextCompletionRequest(prompt="Answer.", json_schema=SCHEMA, streaming=True),
                Context("t", "default", None))):
            got.append(record)
    assert failure.value.type == OFF_SCHEMA
    assert text_of(got) == OFF and not any(r.end_of_stream for r in got if
                                           hasattr(r, "end_of_stream"))
    assert server.stats.requests == 1


async def test_a_schema_without_an_object_root_is_asked_wrapped_and_unwrapped(case):
    case, server, provider = case
    server.reply = lambda prompt: '{"value": ["a", "b"]}'
    listed = {"type": "array", "items": {"type": "string"}}
    [final] = await answer(provider(), schema=listed)
    assert json.loads(final.response) == ["a", "b"]
    sent = server.asked()["schema"]["schema"]
    assert sent["properties"]["value"] == listed and sent["required"] == ["value"]
