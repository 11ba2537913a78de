"""The openai provider reading its HTTP body as the lines that arrived together, and
turning the SSE events of one read into one delta."""
import asyncio

import aiohttp
from aiohttp.base_protocol import BaseProtocol

from trustgraph.model.text_completion.openai.provider import _Answer, waiting_lines
from trustgraph.model.text_completion.provider import LlmError


def body() -> aiohttp.StreamReader:
    """An HTTP body as aiohttp gives it, fed by the test instead of a socket."""
    loop = asyncio.get_running_loop()
    protocol = BaseProtocol(loop)
    protocol.connection_made(asyncio.Transport())
    return aiohttp.StreamReader(protocol, 2 ** 16, loop=loop)


def event(content: str) -> bytes:
    return (b'data: {"choices":[{"index":0,"delta":{"content":"' + content.encode()
            + b'"}}],"model":"m"}')


async def test_lines_that_arrived_together_come_as_one_list():
    reader = body()
    reader.feed_data(b"a\nb\nc")  # "c" waits for the rest of its line
    lines = waiting_lines(reader)
    assert await anext(lines) == [b"a", b"b"]
    reader.feed_data(b"d\n")
    assert await anext(lines) == [b"cd"]
    reader.feed_data(b"e\n\nf")
    reader.feed_eof()
    assert [batch async for batch in lines] == [[b"e", b""], [b"f"]]


async def test_a_read_waits_for_data_and_never_for_more_than_is_there():
    reader = body()
    lines = waiting_lines(reader)
    waiting = asyncio.ensure_future(anext(lines))
    await asyncio.sleep(0)
    assert not waiting.done()  # nothing has arrived
    reader.feed_data(b"first\n")
    assert await waiting == [b"first"]  # one line, handed over at once
    reader.feed_eof()
    assert [batch async for batch in lines] == []


def test_events_read_together_are_one_text_in_order():
    answer = _Answer("server", "configured")
    text, failure = answer.read([event("tok0 "), b"", event("tok1 "), b"", event("tok2 ")])
    assert (text, failure) == ("tok0 tok1 tok2 ", None)
    assert answer.model == "m" and not answer.finished
    assert answer.read([b'data: {"choices":[],"usage":{"completion_tokens":3}}', b"",
                        b"data: [DONE]"]) == ("", None)
    assert answer.finished and answer.usage == {"completion_tokens": 3}


def test_text_before_a_failure_in_the_same_read_is_kept():
    answer = _Answer("server", "m")
    text, failure = answer.read([event("tok0 "), b'data: {"error":{"message":"boom"}}',
                                 event("never")])
    assert text == "tok0 "
    assert isinstance(failure, LlmError) and "boom" in failure.message
    text, failure = _Answer("server", "m").read([event("tok0 "), b"data: {not json"])
    assert text == "tok0 " and isinstance(failure, LlmError)
