"""One contract, every LLM provider: each runs through its real SDK against a local
server speaking that provider's streaming wire format (tests/support/*_server.py,
each listing its ``CASES``)."""
import asyncio
import importlib
import pkgutil

import pytest

import tests.support
from tests.support.scripted_llm import PROMPT_TOKENS, collect, expected_text
from trustgraph.base import Context
from trustgraph.model.text_completion.provider import LlmError, Usage
from trustgraph.model.text_completion.retry import Retrying
from trustgraph.model.text_completion.service import completion_handler, provider_module
from trustgraph.schema import TextCompletionRequest


def _cases():
    for info in pkgutil.iter_modules(tests.support.__path__):
        if info.name.endswith("_server"):
            yield from importlib.import_module(f"tests.support.{info.name}").CASES


CASES = sorted(_cases(), key=lambda case: case.name)


@pytest.fixture(params=CASES, ids=[case.name for case in CASES])
async def case(request):
    case = request.param
    server = await case.server().start()
    module = provider_module(case.provider)
    settings = module.Settings(**case.settings(server))

    made = []

    def provider(retries: int = 0) -> Retrying:
        made.append(Retrying(module.make(settings), retries, base_delay=0.01))
        return made[-1]

    yield case, server, provider
    for each in made:
        await each.aclose()
    await server.stop()


async def test_streams_deltas_in_order_then_usage(case):
    case, server, provider = case
    pieces, usage = await collect(provider().stream("Be terse.", "[tokens=40 delay=0.002]"))
    assert "".join(pieces) == expected_text(40)
    assert len(pieces) > 1  # paced: lines that arrive together may rightly be one piece
    assert usage == Usage(PROMPT_TOKENS, 40, case.model)


async def test_non_streaming_is_the_collected_stream(case):
    case, server, provider = case
    handler = completion_handler(provider())
    records = [r async for r in handler(TextCompletionRequest(prompt="[tokens=9]"),
                                        Context("t", "default", None))]
    assert len(records) == 1 and records[0].end_of_stream
    assert records[0].response == expected_text(9)
    assert (records[0].in_token, records[0].out_token, records[0].model) == \
        (PROMPT_TOKENS, 9, case.model)


SAMPLING = {"max_tokens": 7, "temperature": 0.25, "stop": ["END", "STOP"]}


async def test_a_request_s_sampling_options_reach_the_wire_where_honoured(case):
    # Every provider answers a request carrying them; those whose API takes an option
    # send the request's value (docs/providers says which): a server that shows
    # none of them (``sampled``) belongs to a provider that honours none.
    case, server, provider = case
    handler = completion_handler(provider())
    [record] = [r async for r in handler(TextCompletionRequest(prompt="[tokens=4]", **SAMPLING),
                                         Context("t", "default", None))]
    assert record.response == expected_text(4)
    sampled = getattr(server, "sampled", None)
    if sampled is not None:
        shown = sampled(server.last_body)
        assert shown == {name: SAMPLING[name] for name in shown}


@pytest.mark.parametrize("failure", ["fail_after", "drop_after"])
async def test_failure_mid_stream_is_an_llm_error_after_the_earlier_tokens(case, failure):
    case, server, provider = case
    pieces = []
    with pytest.raises(LlmError) as error:
        async for piece in provider(retries=3).stream("", f"[tokens=10 {failure}=3]"):
            pieces.append(piece)
    assert "".join(pieces) == expected_text(3)
    assert error.value.type == "llm-error" and error.value.message
    assert server.stats.requests == 1  # never retried once tokens were sent


async def test_overload_before_first_token_is_retried(case):
    case, server, provider = case
    pieces, usage = await collect(provider(retries=3).stream("", "[tokens=3 status=429 fail_times=2]"))
    assert "".join(pieces) == expected_text(3)
    assert server.stats.requests == 3


async def test_persistent_overload_becomes_a_clear_error(case):
    case, server, provider = case
    with pytest.raises(LlmError, match="overloaded"):
        await collect(provider(retries=1).stream("", "[status=429]"))
    assert server.stats.requests == 2


async def test_other_http_errors_are_not_retried(case):
    case, server, provider = case
    with pytest.raises(LlmError) as error:
        await collect(provider(retries=3).stream("", "[status=400]"))
    assert error.value.type == "llm-error"
    assert server.stats.requests == 1


async def test_cancel_closes_the_http_stream(case):
    case, server, provider = case
    stream = provider().stream("", "[tokens=1000 delay=0.01]")
    await anext(stream)
    await anext(stream)
    await stream.aclose()
    await asyncio.wait_for(server.disconnected.wait(), 1.0)
