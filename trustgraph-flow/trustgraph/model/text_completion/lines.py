"""A provider's streamed HTTP body (SSE or NDJSON) as lists of lines that arrived
together.

When the process falls behind a stream (many streams on two cores), several of the
provider's lines are already waiting in the socket's buffer. Handing them over as
one list lets the provider yield them as one delta: one record, one broker
message, one websocket frame downstream instead of one per token. Nothing waits
for more data than is already there, so the first token is never delayed.
"""
from collections.abc import AsyncGenerator

import aiohttp


async def waiting_lines(body: aiohttp.StreamReader) -> AsyncGenerator[list[bytes], None]:
    """Every complete line of ``body`` (without its ``\\n``), grouped by what one
    read found waiting; a last line with no newline comes at the end of the body."""
    rest = b""
    while data := await body.readany():
        lines = (rest + data).split(b"\n") if rest else data.split(b"\n")
        rest = lines.pop()
        if lines:
            yield lines
    if rest:
        yield [rest]
